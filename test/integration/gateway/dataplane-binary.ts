/**
 * The native data plane's binary for the tests that run it: built with `make build-native` (flock'd, so
 * two test files building at once do not copy over each other), or, when no cargo is found, a reason to
 * skip (`make test` has cargo; hack/ensure-rust.sh says what it looks for).
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { createWriteStream, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateSigningKey, issueRunToken } from '../../../src/shared/run-tokens.ts';
import { waitFor } from '../../harness/process.ts';

const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export const DATA_PLANE_BIN = join(REPO_ROOT, 'build', 'bin', 'apphost-dataplane');

/** Why the data plane cannot be built here (no usable cargo), or undefined when it can. */
export function noCargo(): string | undefined {
  const r = spawnSync(join(REPO_ROOT, 'hack', 'ensure-rust.sh'), { encoding: 'utf8' });
  return r.status === 0
    ? undefined
    : `no cargo >= 1.85 with clippy/rustfmt (hack/ensure-rust.sh: ${r.stderr.trim()})`;
}

/** Builds build/bin/apphost-dataplane from this tree (incremental: ~1 s when nothing changed). */
export function buildDataPlane(): string {
  mkdirSync(join(REPO_ROOT, 'build'), { recursive: true });
  execFileSync('flock', [join(REPO_ROOT, 'build', '.build-native.lock'), 'make', '-s', 'build-native'], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return DATA_PLANE_BIN;
}

/** What a native gateway process started by `spawnNativeGateway` is given. */
export interface NativeGatewayOptions {
  /** The data plane's folder (sockets), and where `logFile` is written. */
  dir: string;
  bin: string;
  natsUrl: string;
  port: number;
  opsPort: number;
  /** The project a run token is issued for (valid an hour), signed by a key set written into `dir`. */
  projectId: string;
  platformKey: string;
  /** APPHOST_TEST_APPS: entry.ts's static resolver. */
  apps: unknown[];
  /** APPHOST_TEST_HOSTS: custom domains, when the test has any. */
  hosts?: Record<string, { projectId: string; appName: string }>;
  logFile: string;
  /** Bound on /readyz answering 200. */
  startTimeoutMs: number;
}

/**
 * The gateway process in native mode (test/integration/gateway/entry.ts: a static resolver), its output in
 * `logFile`, once its /readyz answers 200, and a run token for `projectId`; short handover, drain and
 * run-stop bounds so a SIGTERM test ends quickly.
 */
export async function spawnNativeGateway(
  o: NativeGatewayOptions,
): Promise<{ child: ChildProcess; token: string }> {
  const keys = { keys: [await generateSigningKey()] };
  const keysFile = join(o.dir, 'run-token-keys.json');
  writeFileSync(keysFile, JSON.stringify(keys));
  const token = await issueRunToken(keys, o.projectId, new Date(Date.now() + 3600_000));
  const child = spawn(process.execPath, [join(REPO_ROOT, 'test/integration/gateway/entry.ts')], {
    env: {
      ...process.env,
      NATS_URL: o.natsUrl,
      APPHOST_LOG_LEVEL: 'info',
      APPHOST_OPS_PORT: String(o.opsPort),
      APPHOST_GATEWAY_PORT: String(o.port),
      APPHOST_GATEWAY_HOST: '127.0.0.1',
      APPHOST_PLATFORM_KEY: o.platformKey,
      APPHOST_RUN_TOKEN_KEYS_FILE: keysFile,
      APPHOST_GATEWAY_DATA_PLANE: 'native',
      APPHOST_GATEWAY_DATA_PLANE_BIN: o.bin,
      APPHOST_GATEWAY_DATA_PLANE_DIR: o.dir,
      APPHOST_GATEWAY_DRAIN_TIMEOUT_MS: '3000',
      APPHOST_GATEWAY_CONNECTION_HANDOVER_MS: '300',
      APPHOST_RUN_STOP_TIMEOUT_MS: '3000',
      APPHOST_TEST_APPS: JSON.stringify(o.apps),
      ...(o.hosts ? { APPHOST_TEST_HOSTS: JSON.stringify(o.hosts) } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = createWriteStream(o.logFile);
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  await waitFor(
    `the native gateway ready (log: ${o.logFile})`,
    async () => (await fetch(`http://127.0.0.1:${o.opsPort}/readyz`)).ok,
    o.startTimeoutMs,
  );
  return { child, token };
}
