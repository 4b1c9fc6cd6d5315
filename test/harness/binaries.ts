import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Where the test binaries are: KUBEBUILDER_ASSETS (the envtest convention), then our build cache. */
export function binaryPath(name: string): string {
  const dirs = [
    process.env.KUBEBUILDER_ASSETS,
    join(process.env.APPHOST_CACHE ?? join(homedir(), '.cache', 'apphost'), 'bin'),
  ].filter((d): d is string => Boolean(d));
  for (const dir of dirs) {
    const candidate = join(dir, name);
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(
    `test binary '${name}' not found in ${dirs.join(', ')}; run 'make deps-tools' (builds it from the Go module proxy) or set KUBEBUILDER_ASSETS`,
  );
}
