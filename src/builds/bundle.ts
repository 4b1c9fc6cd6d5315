/**
 * An app bundle: the files of an app folder chosen by apphost.toml's `include`/`exclude`, as a
 * deterministic tar.gz addressed by its sha256 (archive.ts). `packBundle` makes one from a folder (the
 * CLI); `inspectBundle` checks an uploaded one (the management API) before anything is stored.
 */
import { createHash } from 'node:crypto';
import { readdir, readlink, realpath, stat } from 'node:fs/promises';
import { join, relative, resolve, sep } from 'node:path';
import picomatch from 'picomatch';
import {
  APP_CONFIG_FILE,
  type AppConfig,
  AppConfigError,
  type ConfigProblem,
  DEFAULT_EXCLUDE,
  DEFAULT_INCLUDE,
  DEFAULT_REQUIREMENTS_FILE,
  parseAppConfig,
  runtimeOf,
} from '../apis/v1alpha1/app-config.ts';
import type { Sha256Digest } from '../apis/v1alpha1/types.ts';
import {
  ArchiveError,
  type ArchiveLimits,
  ArchiveProblem,
  type PackEntry,
  type Packed,
  packEntries,
  readArchive,
  sha256Digest,
} from './archive.ts';
import { assembleRequirements, type Requirements, requirementsFile } from './requirements.ts';

export const MiB = 1024 * 1024;
/** Defaults of the bundle bounds (settings of the CLI and the management API: docs/deploy.md). */
export const DEFAULT_BUNDLE_LIMITS: ArchiveLimits = {
  maxBytes: 50 * MiB,
  maxUnpackedBytes: 200 * MiB,
  maxFiles: 10_000,
};
/** apphost.toml and requirements files are read into memory: they must be small. */
export const MAX_CONFIG_FILE_BYTES = 256 * 1024;

export const BundleProblem = {
  ...ArchiveProblem,
  MissingFile: 'missing_file',
  InvalidConfig: 'invalid_config',
} as const;
export type BundleProblem = (typeof BundleProblem)[keyof typeof BundleProblem];

/** What is wrong with a bundle or an app folder; `problems` lists config problems by key path. */
export class BundleError extends Error {
  override readonly name = 'BundleError';
  readonly problem: BundleProblem;
  readonly path: string | undefined;
  readonly problems: ConfigProblem[] | undefined;
  constructor(problem: BundleProblem, message: string, path?: string, problems?: ConfigProblem[]) {
    super(message);
    this.problem = problem;
    this.path = path;
    this.problems = problems;
  }
  static from(err: unknown): unknown {
    if (err instanceof ArchiveError) return new BundleError(err.problem, err.message, err.path);
    if (err instanceof AppConfigError)
      return new BundleError(BundleProblem.InvalidConfig, err.message, APP_CONFIG_FILE, err.problems);
    return err;
  }
}

/** The include/exclude matcher of a config: what goes into the bundle. */
export function fileFilter(config: AppConfig): {
  excluded(path: string): boolean;
  included(path: string): boolean;
} {
  const opts = { dot: true };
  const include = picomatch([...(config.app.include ?? DEFAULT_INCLUDE)], opts);
  const excludes = [...(config.app.exclude ?? DEFAULT_EXCLUDE)];
  // A pattern without a slash matches a name at any depth, as in .gitignore.
  const excludeFull = picomatch(
    excludes.map((p) => (p.includes('/') ? p.replace(/^\//, '') : `**/${p}`)),
    opts,
  );
  return { excluded: (p) => excludeFull(p), included: (p) => include(p) };
}

const toPosix = (p: string) => p.split(sep).join('/');

/**
 * The files to bundle from `dir` (sorted). apphost.toml and the requirements file always go in.
 * Throws BundleError for a symlink that points outside the folder or an entry that is neither a file, a
 * folder nor a symlink.
 */
export async function selectFiles(dir: string, config: AppConfig): Promise<PackEntry[]> {
  const filter = fileFilter(config);
  const always = new Set([APP_CONFIG_FILE]);
  // The named requirements file must be there; the default one goes in whenever it exists.
  const req =
    config.app.dependencies?.requirements !== undefined ? requirementsFile(config, () => false) : undefined;
  always.add(req ?? DEFAULT_REQUIREMENTS_FILE);
  const entries = await walkFolder(
    dir,
    (rel) => always.has(rel) || !filter.excluded(rel),
    (rel) => always.has(rel) || filter.included(rel),
  );
  if (req && !entries.some((e) => e.path === req))
    throw new BundleError(
      BundleProblem.MissingFile,
      `app.dependencies.requirements names ${req}, which is not in the folder`,
      req,
    );
  return entries;
}

/**
 * Every file and symlink under `dir` that `enter` (folders and files) and `take` (files and symlinks)
 * accept, sorted, with relative `/` paths; symlinks must stay inside `dir`.
 */
export async function walkFolder(
  dir: string,
  enter: (rel: string) => boolean = () => true,
  take: (rel: string) => boolean = () => true,
): Promise<PackEntry[]> {
  const root = await realpath(resolve(dir));
  const entries: PackEntry[] = [];
  const walk = async (absDir: string): Promise<void> => {
    const list = await readdir(absDir, { withFileTypes: true });
    list.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const d of list) {
      const abs = join(absDir, d.name);
      const rel = toPosix(relative(root, abs));
      if (!enter(rel)) continue;
      if (d.isDirectory()) {
        await walk(abs);
      } else if (d.isSymbolicLink()) {
        if (take(rel)) entries.push(await symlinkEntry(root, abs, rel));
      } else if (d.isFile()) {
        if (!take(rel)) continue;
        const st = await stat(abs);
        entries.push({
          path: rel,
          type: 'file',
          source: abs,
          size: st.size,
          executable: (st.mode & 0o111) !== 0,
        });
      } else {
        throw new BundleError(BundleProblem.UnsupportedEntry, `${rel}: not a file, folder or symlink`, rel);
      }
    }
  };
  await walk(root);
  return entries;
}

async function symlinkEntry(root: string, abs: string, rel: string): Promise<PackEntry> {
  const target = await readlink(abs);
  const resolvedTarget = resolve(join(abs, '..'), target);
  const out = () =>
    new BundleError(
      BundleProblem.SymlinkOut,
      `${rel}: a symlink that points outside the app folder (${target})`,
      rel,
    );
  const inside = (p: string) => p === root || p.startsWith(`${root}${sep}`);
  if (!inside(resolvedTarget)) throw out();
  // Through other symlinks it may still leave the folder.
  const real = await realpath(abs).catch(() => undefined);
  if (real !== undefined && !inside(real)) throw out();
  return { path: rel, type: 'symlink', linkname: toPosix(relative(join(abs, '..'), resolvedTarget)) || '.' };
}

export interface PackedBundle extends Packed {
  paths: string[];
}

/**
 * Packs an app folder (whose apphost.toml is `config`) into a bundle, within the limits. `configText`
 * is bundled as apphost.toml when the folder has none (an older folder with only app.yaml).
 */
export async function packBundle(
  dir: string,
  config: AppConfig,
  limits: ArchiveLimits,
  configText?: string,
): Promise<PackedBundle> {
  try {
    const entries = await selectFiles(dir, config);
    if (configText !== undefined && !entries.some((e) => e.path === APP_CONFIG_FILE)) {
      const content = Buffer.from(configText);
      entries.push({ path: APP_CONFIG_FILE, type: 'file', content, size: content.length, executable: false });
    }
    const packed = await packEntries(entries, limits);
    return { ...packed, paths: entries.map((e) => e.path) };
  } catch (err) {
    throw BundleError.from(err);
  }
}

/** What the management API learns from an uploaded bundle. */
export interface InspectedBundle {
  digest: Sha256Digest;
  config: AppConfig;
  requirements: Requirements;
  /** sha256 (hex) of every file, by path: the dependency key covers the ones the requirements name. */
  fileDigests: Map<string, string>;
  files: number;
  unpackedBytes: number;
}

/**
 * Checks an uploaded bundle completely: a safe archive within the limits, with a valid apphost.toml at its
 * root, a main.py for the cortex runtime, and the requirements file it names. Throws BundleError.
 */
export async function inspectBundle(data: Buffer, limits: ArchiveLimits): Promise<InspectedBundle> {
  try {
    if (data.length > limits.maxBytes)
      throw new BundleError(
        BundleProblem.TooLarge,
        `the bundle is ${data.length} bytes, more than the limit of ${limits.maxBytes}`,
      );
    const fileDigests = new Map<string, string>();
    const kinds = new Map<string, 'file' | 'symlink'>();
    const small = new Map<string, Buffer>();
    const summary = await readArchive(data, limits, async (entry, content) => {
      kinds.set(entry.path, entry.type);
      if (entry.type !== 'file') return;
      const hash = createHash('sha256');
      const keep: Buffer[] = [];
      let kept = 0;
      for await (const chunk of content as AsyncIterable<Buffer>) {
        hash.update(chunk);
        if (entry.size <= MAX_CONFIG_FILE_BYTES) {
          keep.push(chunk);
          kept += chunk.length;
        }
      }
      fileDigests.set(entry.path, hash.digest('hex'));
      if (kept > 0 || entry.size === 0) small.set(entry.path, Buffer.concat(keep));
    });
    const text = (path: string, why: string): string => {
      if (kinds.get(path) !== 'file')
        throw new BundleError(
          BundleProblem.MissingFile,
          `${path} is missing from the bundle (${why})${kinds.get(path) === 'symlink' ? ': it is a symlink, not a file' : ''}`,
          path,
        );
      const buf = small.get(path);
      if (!buf)
        throw new BundleError(
          BundleProblem.TooLarge,
          `${path} is larger than ${MAX_CONFIG_FILE_BYTES} bytes`,
          path,
        );
      return buf.toString('utf8');
    };
    const config = parseAppConfig(text(APP_CONFIG_FILE, 'every app has one at the root of its folder'));
    if (runtimeOf(config) === 'cortex' && kinds.get('main.py') !== 'file')
      throw new BundleError(
        BundleProblem.MissingFile,
        'main.py is missing from the bundle (the cortex runtime serves the functions of main.py at the root of the folder)',
        'main.py',
      );
    const reqPath = requirementsFile(config, (p) => kinds.get(p) === 'file');
    const requirements = assembleRequirements(
      config,
      reqPath
        ? { path: reqPath, text: text(reqPath, 'apphost.toml names it in app.dependencies.requirements') }
        : undefined,
    );
    return {
      digest: sha256Digest(data),
      config,
      requirements,
      fileDigests,
      files: summary.files,
      unpackedBytes: summary.unpackedBytes,
    };
  } catch (err) {
    throw BundleError.from(err);
  }
}
