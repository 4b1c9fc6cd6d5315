import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:net';

/** A free loopback TCP port (bind to 0, read it, release it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') return reject(new Error('no port'));
      srv.close(() => resolve(addr.port));
    });
  });
}

export interface ManagedProcess {
  readonly child: ChildProcess;
  readonly name: string;
  stop(graceMs?: number): Promise<void>;
}

/**
 * Starts a child that dies with us: a tiny shell watchdog kills it when this process is gone,
 * so an interrupted test run (even SIGKILL) leaves no etcd or apiserver behind.
 */
export function startProcess(
  name: string,
  command: string,
  args: string[],
  opts: { logFile: string; env?: NodeJS.ProcessEnv; cwd?: string },
): ManagedProcess {
  const log = createWriteStream(opts.logFile, { flags: 'a' });
  const watchdog = `"$@" & c=$!; (while kill -0 ${process.pid} 2>/dev/null && kill -0 $c 2>/dev/null; do sleep 1; done; kill -TERM $c 2>/dev/null; sleep 5; kill -KILL $c 2>/dev/null) & trap 'kill -TERM $c 2>/dev/null' TERM INT; wait $c; s=$?; wait $c 2>/dev/null; exit $s`;
  const child = spawn('bash', ['-c', watchdog, name, command, ...args], {
    env: opts.env ?? process.env,
    cwd: opts.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  let exited = false;
  const done = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      resolve();
    });
  });
  return {
    child,
    name,
    async stop(graceMs = 20_000) {
      if (exited) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await done;
      clearTimeout(timer);
    },
  };
}

/** Polls `check` until it returns true or `timeoutMs` passes; the last error is kept for the message. */
export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  intervalMs = 100,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}
