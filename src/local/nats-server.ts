/**
 * Local mode without NATS_URL: a private `nats-server -js` on loopback with its store in a temp
 * folder, stopped (and the folder removed) on exit.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../shared/log.ts';
import { freePort } from './ports.ts';
import type { ChildHandle, Spawner } from './spawner.ts';

export interface LocalNatsSettings {
  /** Bound on the server answering its JetStream health check. */
  startTimeoutMs: number;
  /** Bound on a clean stop after SIGTERM before SIGKILL. */
  stopTimeoutMs: number;
}

export const DEFAULT_LOCAL_NATS_SETTINGS: LocalNatsSettings = {
  startTimeoutMs: 20_000,
  stopTimeoutMs: 10_000,
};

export interface LocalNats {
  url: string;
  pid: number | undefined;
  stop(): Promise<void>;
}

export async function startLocalNats(deps: {
  binary: string;
  spawner: Spawner;
  log: Logger;
  output: (line: string) => void;
  /** Also show the server's [INF] lines. */
  verbose?: boolean;
  settings?: Partial<LocalNatsSettings>;
}): Promise<LocalNats> {
  const s = { ...DEFAULT_LOCAL_NATS_SETTINGS, ...deps.settings };
  const dir = mkdtempSync(join(tmpdir(), 'apphost-dev-nats-'));
  const [port, monitorPort] = await Promise.all([freePort(), freePort()]);
  const child: ChildHandle = deps.spawner.spawn(
    {
      command: deps.binary,
      args: ['-js', '-sd', dir, '-a', '127.0.0.1', '-p', String(port), '-m', String(monitorPort)],
      cwd: dir,
      env: process.env,
    },
    // Its informational start-up banner is noise here; warnings and errors are shown.
    (_stream, line) => {
      if (deps.verbose || !line.includes('[INF]')) deps.output(`[nats] ${line}`);
    },
  );
  let exited = false;
  void child.exited.then(() => {
    exited = true;
  });
  const stop = async () => {
    if (!exited) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), s.stopTimeoutMs);
      await child.exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + s.startTimeoutMs;
  for (;;) {
    if (exited) {
      const info = await child.exited;
      await stop();
      throw new Error(
        `nats-server (${deps.binary}) exited before it was ready (code ${info.code}${info.error ? `, ${info.error.message}` : ''})`,
      );
    }
    try {
      const res = await fetch(`http://127.0.0.1:${monitorPort}/healthz?js-enabled-only=true`, {
        signal: AbortSignal.timeout(1_000),
      });
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`nats-server was not ready within ${s.startTimeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const url = `nats://127.0.0.1:${port}`;
  deps.log.info({ url, pid: child.pid, storeDir: dir }, 'started a local nats-server with JetStream');
  return { url, pid: child.pid, stop };
}
