/**
 * The archive format of bundles and dependency sets: a gzip-compressed tar of regular files and relative
 * symlinks, written deterministically (sorted, zero times and owners, modes 0644/0755) so the same
 * files always give the same sha256. Reading checks every entry before anything is written: no absolute
 * path or `..`, no path through a symlink, no symlink out of the archive, no duplicates, no other entry
 * types, and bounds on the unpacked size and the number of files.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, symlink } from 'node:fs/promises';
import { dirname, join, posix } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import tar from 'tar-stream';
import type { Sha256Digest } from '../apis/v1alpha1/types.ts';

export interface ArchiveLimits {
  /** Largest compressed archive. */
  maxBytes: number;
  /** Largest total size of the files once unpacked (bounds a decompression bomb). */
  maxUnpackedBytes: number;
  maxFiles: number;
}

export const ArchiveProblem = {
  TooLarge: 'too_large',
  TooManyFiles: 'too_many_files',
  UnsafePath: 'unsafe_path',
  SymlinkOut: 'symlink_out',
  UnsupportedEntry: 'unsupported_entry',
  DuplicateEntry: 'duplicate_entry',
  NotAnArchive: 'not_an_archive',
} as const;
export type ArchiveProblem = (typeof ArchiveProblem)[keyof typeof ArchiveProblem];

/** A problem with an archive's content: the caller's fault (400), never a crash. */
export class ArchiveError extends Error {
  override readonly name = 'ArchiveError';
  readonly problem: ArchiveProblem;
  readonly path: string | undefined;
  constructor(problem: ArchiveProblem, message: string, path?: string) {
    super(message);
    this.problem = problem;
    this.path = path;
  }
}

/** One file or symlink to pack; `path` is relative with `/` separators. */
export type PackEntry =
  | { path: string; type: 'file'; source: string; size: number; executable: boolean }
  /** A file given by its content rather than read from disk. */
  | { path: string; type: 'file'; content: Buffer; size: number; executable: boolean }
  | { path: string; type: 'symlink'; linkname: string };

export interface Packed {
  data: Buffer;
  digest: Sha256Digest;
  unpackedBytes: number;
  files: number;
}

export function sha256Digest(data: Uint8Array): Sha256Digest {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

const SHA256_DIGEST = /^sha256:[0-9a-f]{64}$/;
export function isSha256Digest(s: string): s is Sha256Digest {
  return SHA256_DIGEST.test(s);
}

/** Writes the entries (sorted by path) as a deterministic tar.gz, within the limits. */
export async function packEntries(entries: readonly PackEntry[], limits: ArchiveLimits): Promise<Packed> {
  const sorted = [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  if (sorted.length > limits.maxFiles)
    throw new ArchiveError(
      ArchiveProblem.TooManyFiles,
      `${sorted.length} files is more than the limit of ${limits.maxFiles}`,
    );
  let unpackedBytes = 0;
  for (const e of sorted) {
    checkPath(e.path);
    if (e.type === 'file') unpackedBytes += e.size;
    else checkLink(e.path, e.linkname);
  }
  if (unpackedBytes > limits.maxUnpackedBytes)
    throw new ArchiveError(
      ArchiveProblem.TooLarge,
      `the files add up to ${unpackedBytes} bytes, more than the limit of ${limits.maxUnpackedBytes}`,
    );

  const pack = tar.pack();
  const gzip = createGzip({ level: 9 });
  const chunks: Buffer[] = [];
  let size = 0;
  const collected = pipeline(pack, gzip, async (source: AsyncIterable<Buffer>) => {
    for await (const chunk of source) {
      size += chunk.length;
      if (size > limits.maxBytes)
        throw new ArchiveError(
          ArchiveProblem.TooLarge,
          `the archive is larger than the limit of ${limits.maxBytes} bytes`,
        );
      chunks.push(chunk);
    }
  });
  const fixed = { mtime: new Date(0), uid: 0, gid: 0, uname: '', gname: '' };
  try {
    for (const e of sorted) {
      if (e.type === 'symlink') {
        await new Promise<void>((resolve, reject) =>
          pack.entry({ ...fixed, name: e.path, type: 'symlink', linkname: e.linkname, mode: 0o777 }, (err) =>
            err ? reject(err) : resolve(),
          ),
        );
        continue;
      }
      const header = {
        ...fixed,
        name: e.path,
        type: 'file' as const,
        size: e.size,
        mode: e.executable ? 0o755 : 0o644,
      };
      await new Promise<void>((resolve, reject) => {
        if ('content' in e) {
          pack.entry(header, e.content, (err) => (err ? reject(err) : resolve()));
          return;
        }
        const sink = pack.entry(header, (err) => (err ? reject(err) : resolve()));
        // A file that changed size while packing fails the entry (tar-stream checks the length).
        createReadStream(e.source).on('error', reject).pipe(sink);
      });
    }
    pack.finalize();
    await collected;
  } catch (err) {
    pack.destroy();
    await collected.catch(() => {});
    throw err;
  }
  const data = Buffer.concat(chunks);
  return { data, digest: sha256Digest(data), unpackedBytes, files: sorted.length };
}

/** A checked entry, as `readArchive` hands it over. */
export type ArchiveEntry =
  | { path: string; type: 'file'; size: number; executable: boolean }
  | { path: string; type: 'symlink'; linkname: string };

export interface ReadSummary {
  files: number;
  unpackedBytes: number;
}

/**
 * Reads a tar.gz, checking every entry; `visit` gets each file or symlink (directories are implied) and
 * must consume `content` (or call `content.resume()`). Throws ArchiveError for any unsafe or bad entry.
 */
export async function readArchive(
  input: Uint8Array | AsyncIterable<Uint8Array>,
  limits: Omit<ArchiveLimits, 'maxBytes'>,
  visit: (entry: ArchiveEntry, content: Readable) => Promise<void>,
): Promise<ReadSummary> {
  const extract = tar.extract();
  const source = input instanceof Uint8Array ? Readable.from([input]) : Readable.from(input);
  const gunzip = createGunzip();
  const piped = pipeline(source, gunzip, extract).catch((err: unknown) => err);
  const seen = new Map<string, 'file' | 'symlink' | 'directory'>();
  let files = 0;
  let unpackedBytes = 0;
  try {
    for await (const item of extract) {
      const entry = item as unknown as Readable & { header: tar.Header };
      const h = entry.header;
      const type = h.type ?? 'file';
      const path = checkPath(h.name);
      if (type === 'directory') {
        claim(seen, path, 'directory');
        entry.resume();
        continue;
      }
      if (type !== 'file' && type !== 'symlink' && type !== 'contiguous-file')
        throw new ArchiveError(
          ArchiveProblem.UnsupportedEntry,
          `${path}: a ${type} entry; bundles hold only regular files and symlinks`,
          path,
        );
      if (++files > limits.maxFiles)
        throw new ArchiveError(ArchiveProblem.TooManyFiles, `more than ${limits.maxFiles} files`);
      if (type === 'symlink') {
        const linkname = h.linkname ?? '';
        checkLink(path, linkname);
        claim(seen, path, 'symlink');
        entry.resume();
        await visit({ path, type: 'symlink', linkname }, entry);
        continue;
      }
      const size = h.size ?? 0;
      unpackedBytes += size;
      if (unpackedBytes > limits.maxUnpackedBytes)
        throw new ArchiveError(
          ArchiveProblem.TooLarge,
          `unpacked, the files are larger than the limit of ${limits.maxUnpackedBytes} bytes`,
        );
      claim(seen, path, 'file');
      await visit({ path, type: 'file', size, executable: ((h.mode ?? 0o644) & 0o111) !== 0 }, entry);
    }
  } catch (err) {
    extract.destroy();
    await piped;
    throw asArchiveError(err);
  }
  const err = await piped;
  if (err) throw asArchiveError(err);
  return { files, unpackedBytes };
}

/**
 * Unpacks a tar.gz into `dest` (which must be new and empty: files are created exclusively). Every entry
 * is checked first (readArchive), so nothing is written outside `dest` or through a symlink.
 */
export async function extractArchive(
  input: Uint8Array | AsyncIterable<Uint8Array>,
  dest: string,
  limits: Omit<ArchiveLimits, 'maxBytes'>,
): Promise<ReadSummary> {
  await mkdir(dest, { recursive: true });
  return readArchive(input, limits, async (entry, content) => {
    const target = join(dest, ...entry.path.split('/'));
    await mkdir(dirname(target), { recursive: true });
    if (entry.type === 'symlink') {
      await symlink(entry.linkname, target);
      return;
    }
    await pipeline(
      content,
      createWriteStream(target, { flags: 'wx', mode: entry.executable ? 0o755 : 0o644 }),
    );
  });
}

/** Relative, `/`-separated, no `.`/`..`/empty segments, no NUL or backslash; returns it without a trailing `/`. */
export function checkPath(name: string): string {
  const path = name.replace(/\/+$/, '').replace(/^(\.\/)+/, '');
  const bad = (why: string) =>
    new ArchiveError(ArchiveProblem.UnsafePath, `${JSON.stringify(name)}: ${why}`, name);
  if (path === '') throw bad('an empty path');
  if (path.startsWith('/') || /^[A-Za-z]:/.test(path)) throw bad('an absolute path');
  if (path.includes('\\') || path.includes('\0')) throw bad('a backslash or NUL in the path');
  for (const seg of path.split('/')) {
    if (seg === '..') throw bad('a path that escapes the folder (..)');
    if (seg === '' || seg === '.') throw bad('an empty or "." path segment');
  }
  if (path.length > 4096) throw bad('a path longer than 4096 characters');
  return path;
}

/** A symlink must be relative and stay inside the archive once resolved from its own folder. */
export function checkLink(path: string, linkname: string): void {
  const out = () =>
    new ArchiveError(
      ArchiveProblem.SymlinkOut,
      `${path}: a symlink that points outside the folder (${JSON.stringify(linkname)})`,
      path,
    );
  if (linkname === '' || linkname.startsWith('/') || linkname.includes('\0') || linkname.includes('\\'))
    throw out();
  const resolved = posix.normalize(posix.join(posix.dirname(path), linkname));
  if (resolved === '..' || resolved.startsWith('../')) throw out();
}

/** Records `path`; refuses a duplicate, a path below a file or symlink, or a file where a folder was. */
function claim(
  seen: Map<string, 'file' | 'symlink' | 'directory'>,
  path: string,
  type: 'file' | 'symlink' | 'directory',
) {
  const prior = seen.get(path);
  if (prior === 'directory' && type !== 'directory')
    throw new ArchiveError(ArchiveProblem.DuplicateEntry, `${path}: is also a folder in the archive`, path);
  if (prior !== undefined && prior !== 'directory')
    throw new ArchiveError(ArchiveProblem.DuplicateEntry, `${path}: appears twice in the archive`, path);
  const segments = path.split('/');
  for (let i = 1; i < segments.length; i++) {
    const parent = segments.slice(0, i).join('/');
    const p = seen.get(parent);
    if (p === 'symlink')
      throw new ArchiveError(
        ArchiveProblem.SymlinkOut,
        `${path}: a path through the symlink ${parent}`,
        path,
      );
    if (p === 'file')
      throw new ArchiveError(
        ArchiveProblem.DuplicateEntry,
        `${path}: ${parent} is a file, not a folder`,
        path,
      );
    if (p === undefined) seen.set(parent, 'directory');
  }
  seen.set(path, type);
}

function asArchiveError(err: unknown): Error {
  if (err instanceof ArchiveError) return err;
  const e = err as { code?: string; message?: string };
  if (
    e?.code?.startsWith('Z_') ||
    /header check|unexpected end|invalid tar|unexpected eof/i.test(String(e?.message))
  )
    return new ArchiveError(ArchiveProblem.NotAnArchive, `not a gzip-compressed tar archive (${e.message})`);
  return err as Error;
}
