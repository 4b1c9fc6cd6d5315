/**
 * An app's pip requirements, assembled from apphost.toml (`[app.dependencies]`: a requirements file and
 * the `pip` table), and the cache key of the dependency set they build into.
 */
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import { type AppConfig, DEFAULT_REQUIREMENTS_FILE } from '../apis/v1alpha1/app-config.ts';
import { ArchiveError, ArchiveProblem, checkPath } from './archive.ts';

export interface Requirements {
  /** What pip gets with `-r`: the file's lines (comments and blank lines dropped), then the pip table. */
  text: string;
  /** Folders and files of the bundle the lines refer to (wheels, `-r`/`-c` files, find-links folders). */
  localPaths: string[];
}

/** The requirements file apphost.toml names, or the default one when the bundle has it. */
export function requirementsFile(config: AppConfig, exists: (path: string) => boolean): string | undefined {
  const named = config.app.dependencies?.requirements;
  if (named !== undefined) return checkPath(named);
  return exists(DEFAULT_REQUIREMENTS_FILE) ? DEFAULT_REQUIREMENTS_FILE : undefined;
}

/** Logical lines of a requirements file: continuations joined, comments and blank lines dropped. */
function logicalLines(text: string): string[] {
  const out: string[] = [];
  let pending = '';
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.endsWith('\\') ? raw.slice(0, -1) : raw;
    pending += line;
    if (raw.endsWith('\\')) continue;
    const stripped = pending.replace(/(^|\s)#.*$/, '').trim();
    if (stripped) out.push(stripped);
    pending = '';
  }
  const last = pending.replace(/(^|\s)#.*$/, '').trim();
  if (last) out.push(last);
  return out;
}

const PATH_OPTIONS = /^(-r|--requirement|-c|--constraint|-f|--find-links|-e|--editable)(?:[=\s]+)(\S+)/;

/**
 * A path a requirement line refers to that lies in the bundle (relative, not a URL); undefined otherwise.
 * pip reads option paths (`-r`, `-f`, ...) relative to the requirements file, requirement paths relative to
 * its working folder (the bundle's root).
 */
function bundlePathOf(line: string, fileDir: string): string | undefined {
  let candidate: string | undefined;
  let base = '.';
  const opt = PATH_OPTIONS.exec(line);
  if (opt) {
    candidate = opt[2];
    base = fileDir;
  } else if (/^\.{1,2}\//.test(line)) candidate = line.split(/[\s;[]/)[0];
  else {
    const at = /@\s*file:(\S+)/.exec(line);
    if (at) candidate = at[1];
  }
  if (!candidate) return undefined;
  candidate = candidate.replace(/^file:(\/\/)?/, '');
  if (/^[a-z][a-z0-9+.-]*:/i.test(candidate) || candidate.startsWith('/')) return undefined;
  const resolved = posix.normalize(posix.join(base, candidate)).replace(/\/$/, '');
  if (resolved === '..' || resolved.startsWith('../'))
    throw new ArchiveError(
      ArchiveProblem.UnsafePath,
      `requirements refer to ${JSON.stringify(candidate)}, outside the app folder (the build only has the bundle)`,
      candidate,
    );
  return resolved === '.' ? '' : resolved;
}

export function assembleRequirements(
  config: AppConfig,
  file: { path: string; text: string } | undefined,
): Requirements {
  const lines = file ? logicalLines(file.text) : [];
  const base = file ? posix.dirname(file.path) : '.';
  const localPaths = new Set<string>();
  for (const line of lines) {
    const p = bundlePathOf(line, base);
    if (p !== undefined) localPaths.add(p);
  }
  if (file) localPaths.add(file.path);
  for (const [name, spec] of Object.entries(config.app.dependencies?.pip ?? {})) {
    const s = spec.trim();
    lines.push(s === '' || s === '*' ? name : `${name}${s}`);
  }
  return { text: lines.length ? `${lines.join('\n')}\n` : '', localPaths: [...localPaths].sort() };
}

/** What a dependency set depends on besides the requirements: the Python and platform that run it. */
export interface BuildTarget {
  pythonVersion: string;
  /** e.g. `linux-x86_64`: wheels are platform-specific. */
  platform: string;
  /** The runtime's identity (its image, or its constraints): a new runtime rebuilds every set. */
  runtime: string;
}

/**
 * The cache key of a dependency set: sha256 over the target, the requirement lines and the sha256 of
 * every bundle file those lines refer to. Equal keys build equal sets, so a build is skipped on a hit.
 */
export function dependencyKey(
  target: BuildTarget,
  reqs: Requirements,
  fileDigests: ReadonlyMap<string, string>,
): string {
  const files: Array<[string, string]> = [];
  for (const [path, digest] of fileDigests)
    if (reqs.localPaths.some((p) => p === '' || path === p || path.startsWith(`${p}/`)))
      files.push([path, digest]);
  files.sort((a, b) => (a[0] < b[0] ? -1 : 1));
  const canonical = JSON.stringify({
    v: 1,
    python: target.pythonVersion,
    platform: target.platform,
    runtime: target.runtime,
    requirements: reqs.text,
    files,
  });
  return createHash('sha256').update(canonical).digest('hex');
}
