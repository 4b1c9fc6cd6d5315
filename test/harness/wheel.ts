/**
 * Makes a small pure-Python wheel without network or build tools (the wheel format is a zip with
 * METADATA, WHEEL and RECORD), so dependency builds can be tested against a local folder.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const SCRIPT = `
import base64, hashlib, sys, zipfile
out, name, version, module_source = sys.argv[1:5]
dist = f"{name}-{version}.dist-info"
files = {
    f"{name}/__init__.py": module_source,
    f"{dist}/METADATA": f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n",
    f"{dist}/WHEEL": "Wheel-Version: 1.0\\nGenerator: apphost-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = []
for path, text in files.items():
    data = text.encode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{path},sha256={digest},{len(data)}")
record.append(f"{dist}/RECORD,,")
files[f"{dist}/RECORD"] = "\\n".join(record) + "\\n"
with zipfile.ZipFile(out, "w") as z:
    for path, text in files.items():
        z.writestr(path, text)
`;

/** Writes `<dir>/<name>-<version>-py3-none-any.whl` whose package `name` has `source` as __init__.py. */
export function makeWheel(
  python: string,
  dir: string,
  name: string,
  version: string,
  source: string,
): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}-${version}-py3-none-any.whl`);
  const r = spawnSync(python, ['-c', SCRIPT, file, name, version, source], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(`making ${file} failed: ${r.stderr || r.error?.message}`);
  return file;
}
