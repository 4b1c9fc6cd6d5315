/** A real nats-server with JetStream in its own store dir on a free loopback port. */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { binaryPath } from './binaries.ts';
import { freePort, type ManagedProcess, startProcess, waitFor } from './process.ts';

export const NATS_START_TIMEOUT_MS = 30_000;

export interface NatsServer {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** Stops the server; the store dir is kept when `keepStore` so a restart finds the same streams. */
  stop(opts?: { keepStore?: boolean }): Promise<void>;
  /** Starts the server again on the same port and store (after `stop({ keepStore: true })`). */
  restart(): Promise<void>;
  /** Sends `signal` to the nats-server process itself (SIGSTOP/SIGCONT: a server that hangs, then resumes). */
  signal(signal: NodeJS.Signals): void;
}

/** The pid of the `nats-server` child of the harness's watchdog shell (Linux /proc). */
function natsServerPid(shellPid: number): number | undefined {
  const children = readFileSync(`/proc/${shellPid}/task/${shellPid}/children`, 'utf8').trim().split(/\s+/);
  return children
    .map(Number)
    .find((pid) => pid > 0 && readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'nats-server');
}

/** `env`: more environment for the server (e.g. the chart's Go runtime settings, as the benchmark runs it). */
export async function startNats(opts: { env?: Record<string, string> } = {}): Promise<NatsServer> {
  const dir = mkdtempSync(join(tmpdir(), 'apphost-nats-'));
  const [port, monitorPort] = await Promise.all([freePort(), freePort()]);
  let proc: ManagedProcess | undefined;
  const launch = async () => {
    proc = startProcess(
      'nats-server',
      binaryPath('nats-server'),
      ['-js', '-sd', join(dir, 'store'), '-a', '127.0.0.1', '-p', String(port), '-m', String(monitorPort)],
      { logFile: join(dir, 'nats.log'), env: { ...process.env, ...opts.env } },
    );
    await waitFor(
      'nats-server /healthz?js-enabled-only=true',
      async () => (await fetch(`http://127.0.0.1:${monitorPort}/healthz?js-enabled-only=true`)).ok,
      NATS_START_TIMEOUT_MS,
    );
  };
  await launch();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    dir,
    async stop(opts) {
      await proc?.stop(10_000);
      if (!opts?.keepStore && !process.env.APPHOST_TEST_KEEP_DIRS)
        rmSync(dir, { recursive: true, force: true });
    },
    restart: launch,
    signal(sig) {
      const pid = proc?.child.pid ? natsServerPid(proc.child.pid) : undefined;
      if (!pid) throw new Error('nats-server is not running');
      process.kill(pid, sig);
    },
  };
}
