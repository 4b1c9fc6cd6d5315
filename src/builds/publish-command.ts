/**
 * `apphost publish-dependencies`: the last step of a dependency build Job (the platform image). Packs the
 * folder pip installed into, stores it in the artifact store by sha256 and records it under the build's
 * dependency key, where the build worker finds it.
 */
import { mkdir } from 'node:fs/promises';
import { connect } from '@nats-io/transport-node';
import { type CommandSpec, type LineIo, parseOrHelp, STDIO, UsageError } from '../shared/cli/command.ts';
import { ArchiveError, packEntries } from './archive.ts';
import { openExistingArtifactStore } from './artifact-store.ts';
import { DEFAULT_DEPENDENCY_LIMITS } from './builder.ts';
import { walkFolder } from './bundle.ts';

export const DEFAULT_PUBLISH_TIMEOUT_SECONDS = 600;

export const PUBLISH_DEPENDENCIES_SPEC: CommandSpec = {
  name: 'publish-dependencies',
  summary:
    'Pack a folder pip installed into, store it by sha256 and record it under a dependency key.\nThe last step of a dependency build Job.',
  flags: {
    dir: { type: 'string', value: 'DIR', description: 'the pip --target folder (required)' },
    key: {
      type: 'string',
      value: 'KEY',
      description: 'the dependency key (64 hex) to record it under (required)',
    },
  },
  settings: [
    { name: 'NATS_URL', description: 'the NATS server of the artifact store (required)' },
    {
      name: 'APPHOST_PUBLISH_TIMEOUT_SECONDS',
      description: `bound on the whole step (${DEFAULT_PUBLISH_TIMEOUT_SECONDS})`,
    },
  ],
  examples: ['NATS_URL=nats://nats:4222 apphost publish-dependencies --dir /work/deps --key 3f…'],
};

export async function runPublishDependenciesCommand(
  argv: string[],
  env: NodeJS.ProcessEnv,
  io: LineIo = STDIO,
): Promise<number> {
  const parsed = parseOrHelp(PUBLISH_DEPENDENCIES_SPEC, argv, io);
  if (!parsed) return 0;
  const v = parsed.values as Record<string, string | undefined>;
  if (!v.dir || !v.key) throw new UsageError('--dir and --key are required');
  if (!/^[0-9a-f]{64}$/.test(v.key)) throw new UsageError('--key must be 64 lowercase hex digits');
  if (!env.NATS_URL) throw new UsageError('NATS_URL is required');
  const timeoutMs = Number(env.APPHOST_PUBLISH_TIMEOUT_SECONDS || DEFAULT_PUBLISH_TIMEOUT_SECONDS) * 1000;
  const timer = setTimeout(() => {
    io.err(`apphost publish-dependencies: not done within ${timeoutMs / 1000} s`);
    process.exit(1);
  }, timeoutMs);
  timer.unref();
  await mkdir(v.dir, { recursive: true });
  let packed: Awaited<ReturnType<typeof packEntries>>;
  try {
    packed = await packEntries(await walkFolder(v.dir), DEFAULT_DEPENDENCY_LIMITS);
  } catch (err) {
    clearTimeout(timer);
    if (err instanceof ArchiveError) {
      io.err(`the dependency set: ${err.message}`);
      return 1;
    }
    throw err;
  }
  const nc = await connect({ servers: env.NATS_URL, name: 'apphost-publish-dependencies', timeout: 30_000 });
  try {
    const store = await openExistingArtifactStore(nc);
    await store.put(packed.digest, packed.data);
    await store.recordDependencySet(v.key, packed.digest);
    io.out(`dependency set ${packed.digest}: ${packed.files} files, ${packed.unpackedBytes} bytes, stored`);
    return 0;
  } finally {
    clearTimeout(timer);
    await nc.close();
  }
}
