/**
 * The gateway's front in native mode (APPHOST_GATEWAY_DATA_PLANE=native, design §1): Node serves the
 * hand-off socket instead of APPHOST_GATEWAY_PORT, and the supervised data plane owns the port. What
 * serve.ts calls in place of its own listener and its handover/drain steps.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { join } from 'node:path';
import type { Registry } from 'prom-client';
import type { Logger } from '../../shared/log.ts';
import type { ReadinessCheck } from '../../shared/ops.ts';
import type { GatewayEnv } from '../config.ts';
import { dataPlaneConfig } from './config-frame.ts';
import type { StateFeed } from './feed.ts';
import { serveHandoff } from './handoff.ts';
import {
  type DataPlaneSupervisor,
  type SpawnDataPlane,
  spawnDataPlane,
  superviseDataPlane,
} from './supervise.ts';

/** The hand-off socket's name in APPHOST_GATEWAY_DATA_PLANE_DIR. */
export const HANDOFF_SOCKET_NAME = 'handoff.sock';

export interface NativeFront {
  /** The hand-off server (what `GatewayProcess.server` is in native mode). */
  server: Server;
  supervisor: DataPlaneSupervisor;
  /** The port the data plane listens on. */
  port: number;
  check: ReadinessCheck;
  /** Shutdown: `drain{handover}`, then the data plane's handover period (APPHOST_GATEWAY_CONNECTION_HANDOVER_MS). */
  handover(): Promise<void>;
  /** Shutdown: `drain{drain}` until the child exits (bounded), then the hand-off server closes. */
  drain(): Promise<void>;
}

export async function startNativeFront(opts: {
  env: GatewayEnv;
  log: Logger;
  registry: Registry;
  callback: (req: IncomingMessage, res: ServerResponse) => void;
  feed: StateFeed;
  /** Whether the resolver reports replicas (`watchReplicas`); without, the data plane routes as `service`. */
  replicasReported: boolean;
  /** Replaces the real spawn (tests of faults the binary cannot produce). */
  spawn?: SpawnDataPlane;
}): Promise<NativeFront> {
  const { env, log } = opts;
  const path = join(env.APPHOST_GATEWAY_DATA_PLANE_DIR, HANDOFF_SOCKET_NAME);
  const handoff = await serveHandoff({
    path,
    callback: opts.callback,
    log: log.child({ component: 'handoff' }),
    registry: opts.registry,
  });
  // The data plane does not report the port it bound (v1): a port of 0 (tests, `apphost dev`) is
  // chosen here, the way the kernel would, and given to it.
  const port =
    env.APPHOST_GATEWAY_PORT === 0 ? await freePort(env.APPHOST_GATEWAY_HOST) : env.APPHOST_GATEWAY_PORT;
  const supervisor = superviseDataPlane({
    spawn:
      opts.spawn ??
      spawnDataPlane(env.APPHOST_GATEWAY_DATA_PLANE_BIN, {
        APPHOST_GATEWAY_DATA_PLANE_THREADS: String(env.APPHOST_GATEWAY_DATA_PLANE_THREADS),
      }),
    config: dataPlaneConfig({ ...env, APPHOST_GATEWAY_PORT: port }, path, opts.replicasReported),
    feed: opts.feed,
    log: log.child({ component: 'dataplane' }),
    registry: opts.registry,
    drainTimeoutMs: env.APPHOST_GATEWAY_DRAIN_TIMEOUT_MS,
  });
  supervisor.start();
  return {
    server: handoff.server,
    supervisor,
    port,
    check: supervisor.check,
    async handover() {
      supervisor.handover();
      await new Promise((r) => setTimeout(r, env.APPHOST_GATEWAY_CONNECTION_HANDOVER_MS));
    },
    async drain() {
      // Node's hand-off server stays open while the data plane drains: its calls in flight were handed over.
      await supervisor.drain();
      await handoff.close();
    },
  };
}

/** A TCP port free on `host` now. */
async function freePort(host: string): Promise<number> {
  const srv = createNetServer();
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(0, host, () => resolve());
  });
  const a = srv.address();
  await new Promise((r) => srv.close(r));
  if (typeof a !== 'object' || !a) throw new Error(`no free port on ${host}`);
  return a.port;
}
