/**
 * `apphost fetch-artifacts`: what the init container of a deployed App's pod runs (the platform image).
 * Gets the bundle (and the dependency set) from the artifact store, checks each against its sha256 and
 * unpacks it into its folder — an emptyDir the app container then mounts read-only. Whatever a failed
 * attempt left is removed first, so a restarted init container starts clean.
 */
import { readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import type { Sha256Digest } from '../apis/v1alpha1/types.ts';
import { type CommandSpec, type LineIo, parseOrHelp, STDIO, UsageError } from '../shared/cli/command.ts';
import { extractArchive, isSha256Digest } from './archive.ts';
import { openArtifactStoreForReading } from './artifact-store.ts';
import { DEFAULT_DEPENDENCY_LIMITS } from './builder.ts';

/** Default bound on the whole fetch (APPHOST_FETCH_TIMEOUT_SECONDS). */
export const DEFAULT_FETCH_TIMEOUT_SECONDS = 300;

export const FETCH_ARTIFACTS_SPEC: CommandSpec = {
  name: 'fetch-artifacts',
  summary:
    "Fetch an app version's bundle (and dependency set) from the artifact store, check their sha256 and unpack them.\nThe init container of a deployed App's pods runs this.",
  flags: {
    bundle: { type: 'string', value: 'DIGEST', description: 'the bundle, sha256:<hex> (required)' },
    into: { type: 'string', value: 'DIR', description: 'where the bundle is unpacked (required)' },
    dependencies: { type: 'string', value: 'DIGEST', description: 'the dependency set, sha256:<hex>' },
    'dependencies-into': {
      type: 'string',
      value: 'DIR',
      description: 'where the dependency set is unpacked',
    },
    file: {
      type: 'string',
      value: 'DIGEST:PATH',
      description:
        "also a plain artifact (not an archive), checked and written to PATH (a build's requirements)",
    },
  },
  settings: [
    { name: 'NATS_URL', description: 'the NATS server of the artifact store (required)' },
    {
      name: 'APPHOST_FETCH_TIMEOUT_SECONDS',
      description: `bound on the whole fetch (${DEFAULT_FETCH_TIMEOUT_SECONDS})`,
    },
  ],
  examples: [
    'NATS_URL=nats://nats.apphost-system:4222 apphost fetch-artifacts --bundle sha256:… --into /app --dependencies sha256:… --dependencies-into /deps',
  ],
};

/** Empties a folder without removing it (it is a mount point). */
async function emptyDir(dir: string): Promise<void> {
  const entries = await readdir(dir).catch(() => []);
  await Promise.all(entries.map((e) => rm(join(dir, e), { recursive: true, force: true })));
}

export async function runFetchArtifactsCommand(
  argv: string[],
  env: NodeJS.ProcessEnv,
  io: LineIo = STDIO,
): Promise<number> {
  const parsed = parseOrHelp(FETCH_ARTIFACTS_SPEC, argv, io);
  if (!parsed) return 0;
  const v = parsed.values as Record<string, string | undefined>;
  const wanted: Array<{ digest: Sha256Digest; dir: string; what: string }> = [];
  const digest = (flag: string) => {
    const d = v[flag];
    if (d !== undefined && !isSha256Digest(d))
      throw new UsageError(`--${flag} must be sha256:<64 lowercase hex>`);
    return d as Sha256Digest | undefined;
  };
  const bundle = digest('bundle');
  if (!bundle || !v.into) throw new UsageError('--bundle and --into are required');
  wanted.push({ digest: bundle, dir: v.into, what: 'bundle' });
  const deps = digest('dependencies');
  if (deps) {
    if (!v['dependencies-into']) throw new UsageError('--dependencies needs --dependencies-into');
    wanted.push({ digest: deps, dir: v['dependencies-into'], what: 'dependency set' });
  }
  let file: { digest: Sha256Digest; path: string } | undefined;
  if (v.file !== undefined) {
    const m = /^(sha256:[0-9a-f]{64}):(.+)$/.exec(v.file);
    if (!m?.[1] || !m[2]) throw new UsageError('--file must be sha256:<64 hex>:<path>');
    file = { digest: m[1] as Sha256Digest, path: m[2] };
  }
  if (!env.NATS_URL) throw new UsageError('NATS_URL is required');
  const timeoutMs = Number(env.APPHOST_FETCH_TIMEOUT_SECONDS || DEFAULT_FETCH_TIMEOUT_SECONDS) * 1000;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0)
    throw new UsageError('APPHOST_FETCH_TIMEOUT_SECONDS must be a positive number');

  const timer = setTimeout(() => {
    io.err(`apphost fetch-artifacts: not done within ${timeoutMs / 1000} s`);
    process.exit(1);
  }, timeoutMs);
  timer.unref();
  const nc = await connect({
    servers: env.NATS_URL,
    name: 'apphost-fetch-artifacts',
    timeout: Math.min(timeoutMs, 30_000),
  });
  try {
    const store = await openArtifactStoreForReading(nc);
    for (const w of wanted) {
      await emptyDir(w.dir);
      try {
        const r = await extractArchive(await store.stream(w.digest), w.dir, DEFAULT_DEPENDENCY_LIMITS);
        io.out(`${w.what} ${w.digest}: ${r.files} files, ${r.unpackedBytes} bytes, checked, in ${w.dir}`);
      } catch (err) {
        // A corrupt or unsafe artifact leaves nothing behind for the app to run.
        await emptyDir(w.dir);
        throw new Error(`${w.what} ${w.digest}: ${(err as Error).message}`);
      }
    }
    if (file) {
      const data = await store.get(file.digest);
      await writeFile(file.path, data);
      io.out(`file ${file.digest}: ${data.length} bytes, checked, in ${file.path}`);
    }
    return 0;
  } finally {
    clearTimeout(timer);
    await nc.close();
  }
}
