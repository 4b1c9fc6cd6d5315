/**
 * The local dependency builder (apphost dev): `pip install --target` in a subprocess of the same Python
 * that runs the apps, constrained by the runtime's pins; the folder is packed, stored by sha256 and kept
 * in the local cache, so starting the app needs no second unpacking.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ArchiveError, extractArchive, packEntries } from './archive.ts';
import type { ArtifactStore } from './artifact-store.ts';
import {
  BUILD_REQUIREMENTS_FILE,
  BuildFailure,
  DEFAULT_DEPENDENCY_LIMITS,
  type DependencyBuilder,
  pipArgs,
  pipError,
} from './builder.ts';
import { BundleError, DEFAULT_BUNDLE_LIMITS, walkFolder } from './bundle.ts';
import { type CommandRunner, nodeCommandRunner } from './command.ts';
import type { BuildTarget } from './requirements.ts';

export interface LocalBuilderSettings {
  /** Bound on one pip run. */
  buildTimeoutMs: number;
  /** Bound on asking the Python for its version, platform and the runtime's constraints. */
  probeTimeoutMs: number;
  /** Lines of pip output kept to explain a failure. */
  tailLines: number;
}

export const DEFAULT_LOCAL_BUILDER_SETTINGS: LocalBuilderSettings = {
  buildTimeoutMs: 15 * 60_000,
  probeTimeoutMs: 60_000,
  tailLines: 40,
};

export interface LocalBuilderDeps {
  python: string;
  store: ArtifactStore;
  /** Working folders of builds (removed after each). */
  workDir: string;
  /** Where built sets are kept, one folder per digest (see `artifactDir`). */
  cacheDir: string;
  env: NodeJS.ProcessEnv;
  runner?: CommandRunner;
  settings?: Partial<LocalBuilderSettings>;
}

/** The folder an unpacked artifact (a dependency set, a bundle) lives in, in a local cache. */
export function artifactDir(cacheDir: string, digest: string): string {
  return join(cacheDir, digest.replace(':', '-'));
}

const PROBE = [
  'import sys, sysconfig',
  'print(f"{sys.version_info[0]}.{sys.version_info[1]}")',
  'print(sysconfig.get_platform())',
].join('; ');

export function createLocalBuilder(deps: LocalBuilderDeps): DependencyBuilder {
  const s = { ...DEFAULT_LOCAL_BUILDER_SETTINGS, ...deps.settings };
  const runner = deps.runner ?? nodeCommandRunner;
  let probed: Promise<{ target: BuildTarget; constraints: string }> | undefined;

  const capture = async (args: string[], what: string): Promise<string> => {
    const lines: string[] = [];
    const r = await runner.run(deps.python, args, {
      cwd: deps.workDir,
      env: deps.env,
      timeoutMs: s.probeTimeoutMs,
      onLine: (l) => lines.push(l),
    });
    if (r.code !== 0)
      throw new Error(
        `${deps.python} ${what} failed (${r.error?.message ?? `exit ${r.code}`}): ${lines.slice(-5).join(' | ')}`,
      );
    return lines.join('\n');
  };

  const probe = () => {
    probed ??= (async () => {
      await mkdir(deps.workDir, { recursive: true });
      const [version = '', platform = ''] = (await capture(['-c', PROBE], 'probe')).split('\n');
      const constraints = await capture(
        ['-m', 'apphost_runtime.constraints'],
        '-m apphost_runtime.constraints',
      );
      const runtime = `constraints:${createHash('sha256').update(constraints).digest('hex').slice(0, 16)}`;
      return { target: { pythonVersion: version.trim(), platform: platform.trim(), runtime }, constraints };
    })();
    probed.catch(() => {
      probed = undefined;
    });
    return probed;
  };

  return {
    target: async () => (await probe()).target,

    async build(req, log, signal) {
      let probedNow: { target: BuildTarget; constraints: string };
      try {
        probedNow = await probe();
      } catch (err) {
        return { ok: false, failure: BuildFailure.Infrastructure, message: (err as Error).message };
      }
      await mkdir(deps.workDir, { recursive: true });
      const work = await mkdtemp(join(deps.workDir, `build-${req.buildId}-`));
      try {
        const src = join(work, 'src');
        await extractArchive(await deps.store.stream(req.bundle), src, DEFAULT_BUNDLE_LIMITS);
        const reqFile = join(src, ...req.requirementsDir.split('/').filter(Boolean), BUILD_REQUIREMENTS_FILE);
        await writeFile(reqFile, req.requirements.text);
        const constraints = join(work, 'constraints.txt');
        await writeFile(constraints, `${probedNow.constraints}\n`);
        const target = join(work, 'deps');
        const args = pipArgs(target, constraints, reqFile);
        log(`$ ${deps.python} ${args.join(' ')}`);
        const tail: string[] = [];
        const r = await runner.run(deps.python, args, {
          cwd: src,
          env: { ...deps.env, PYTHONDONTWRITEBYTECODE: '1' },
          timeoutMs: s.buildTimeoutMs,
          signal,
          onLine: (line) => {
            log(line);
            tail.push(line);
            if (tail.length > s.tailLines) tail.shift();
          },
        });
        if (r.timedOut)
          return {
            ok: false,
            failure: BuildFailure.Timeout,
            message: `pip install did not finish within ${Math.round(s.buildTimeoutMs / 1000)} s`,
          };
        if (r.aborted)
          return { ok: false, failure: BuildFailure.Infrastructure, message: 'the build was stopped' };
        if (r.error) return { ok: false, failure: BuildFailure.Infrastructure, message: r.error.message };
        if (r.code !== 0)
          return { ok: false, failure: BuildFailure.PipFailed, message: pipError(tail, r.code) };

        await mkdir(target, { recursive: true });
        const packed = await packEntries(await walkFolder(target), DEFAULT_DEPENDENCY_LIMITS);
        await deps.store.put(packed.digest, packed.data);
        await deps.store.recordDependencySet(req.key, packed.digest);
        // Keep the folder itself as the local copy of the set (it is what the digest was made from).
        const kept = artifactDir(deps.cacheDir, packed.digest);
        await mkdir(deps.cacheDir, { recursive: true });
        await rename(target, kept).catch(async () => {
          // Another build made the same set first: theirs is as good.
        });
        log(`dependency set ${packed.digest}: ${packed.files} files, ${packed.unpackedBytes} bytes`);
        return { ok: true, digest: packed.digest, files: packed.files, unpackedBytes: packed.unpackedBytes };
      } catch (err) {
        if (err instanceof ArchiveError || err instanceof BundleError)
          return {
            ok: false,
            failure:
              err.problem === 'too_large' || err.problem === 'too_many_files'
                ? BuildFailure.TooLarge
                : BuildFailure.Infrastructure,
            message: `the dependency set: ${err.message}`,
          };
        return { ok: false, failure: BuildFailure.Infrastructure, message: (err as Error).message };
      } finally {
        await rm(work, { recursive: true, force: true });
      }
    },
  };
}

/**
 * Makes a stored artifact available as a folder in a local cache (bundles and dependency sets alike):
 * unpacked into a temporary folder, verified against its digest, then renamed into place.
 */
export async function materialize(store: ArtifactStore, digest: string, cacheDir: string): Promise<string> {
  const dir = artifactDir(cacheDir, digest);
  if (existsSync(dir)) return dir;
  await mkdir(cacheDir, { recursive: true });
  const tmp = await mkdtemp(join(cacheDir, '.incoming-'));
  try {
    await extractArchive(
      await store.stream(digest as `sha256:${string}`),
      join(tmp, 'x'),
      DEFAULT_DEPENDENCY_LIMITS,
    );
    await rename(join(tmp, 'x'), dir).catch((err: NodeJS.ErrnoException) => {
      if (!existsSync(dir)) throw err;
    });
    return dir;
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}
