/**
 * The gateway's front in native mode (APPHOST_GATEWAY_DATA_PLANE=native, design §1): Node serves the
 * hand-off socket instead of the gateway's port, and the supervised data plane owns the port, fed with
 * the state it needs (design §4). One wiring for both callers: serve.ts (a cluster's gateway, settings
 * from GatewayEnv) and local mode (`apphost dev`, src/local/platform.ts, settings from its options).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer as createNetServer, Server as NetServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { Counter, type Registry } from 'prom-client';
import type { SyncCall } from '../../runs/sync-calls.ts';
import type { AppLoad } from '../../shared/contracts/scaling.ts';
import type { AppResolver } from '../../shared/contracts/seams.ts';
import type { Logger } from '../../shared/log.ts';
import type { MetricsSource, ReadinessCheck } from '../../shared/ops.ts';
import type { GatewayEnv } from '../config.ts';
import { createPublicServer } from '../public-server.ts';
import { mergedMetrics } from '../questions.ts';
import type { RememberedToken } from '../token-cache.ts';
import { configFrame, type DataPlaneSettings, dataPlaneSettings } from './config-frame.ts';
import { createStateFeed, type StateFeed, teeReplicas } from './feed.ts';
import { listenOnSocketFile, serveHandoff } from './handoff.ts';
import { type ProcessUsage, procUsage } from './proc-usage.ts';
import {
  type DataPlaneSupervisor,
  type SpawnDataPlane,
  spawnDataPlane,
  superviseDataPlane,
} from './supervise.ts';

/** The hand-off socket's name in APPHOST_GATEWAY_DATA_PLANE_DIR. */
export const HANDOFF_SOCKET_NAME = 'handoff.sock';
/**
 * The socket the public server for handed-over connections listens on (design §3a), in the same folder.
 * Nothing connects to it: node:http tracks a server's connections (closeIdleConnections,
 * closeAllConnections, the headers and request timeouts' checker) only from its 'listening' event
 * (`setupConnectionsTracking`), and a listening server is the supported way to have that.
 */
export const HANDED_SOCKET_NAME = 'handed.sock';

/** Native mode's settings: the `config` frame's, and where the binary and the socket are. */
export interface NativeSettings extends DataPlaneSettings {
  /** APPHOST_GATEWAY_DATA_PLANE_BIN. */
  bin: string;
  /** APPHOST_GATEWAY_DATA_PLANE_DIR: the folder of the hand-off socket. */
  dir: string;
  /** APPHOST_GATEWAY_DATA_PLANE_THREADS (the one setting the child reads from its environment). */
  threads: number;
}

export function nativeSettings(env: GatewayEnv): NativeSettings {
  return {
    ...dataPlaneSettings(env),
    bin: env.APPHOST_GATEWAY_DATA_PLANE_BIN,
    dir: env.APPHOST_GATEWAY_DATA_PLANE_DIR,
    threads: env.APPHOST_GATEWAY_DATA_PLANE_THREADS,
  };
}

/**
 * Native mode before the gateway exists: the state feed, tapped into the seams `createGateway` is given.
 * Its resolver's apps and domains are watched from now on; `start` serves the gateway behind the data plane.
 */
export interface NativeMode {
  /** The resolver to give `createGateway`: the one passed in, its replica reports also fed to the data plane. */
  readonly resolver: AppResolver;
  /** `cachedRunTokenVerifier`'s `onRemember`: each verified token is pushed, so the data plane serves its calls. */
  onRemember(t: RememberedToken): void;
  /** Starts the hand-off server on `callback` and the data plane (on a free port when the settings say 0). */
  start(
    opts: {
      callback: (req: IncomingMessage, res: ServerResponse) => void;
      /** Replaces the real spawn (tests of faults the binary cannot produce). */
      spawn?: SpawnDataPlane;
      /** Replaces the real reader of the child's CPU and memory (/proc). */
      usage?: ProcessUsage;
    } & DataPlaneReports,
  ): Promise<NativeFront>;
}

/** Where the data plane's reports on the calls it serves go (design §4, step 7). */
export interface DataPlaneReports {
  /** Its `load` frames: the load reporter's `publish` (reporter `<reporter>-dp`). */
  publishLoad?: (apps: AppLoad[]) => void;
  /** Its admitted sync-call records: the gateway's `recordSyncCall`. */
  recordSyncCall?: (call: SyncCall) => void;
}

export function nativeMode(opts: {
  settings: NativeSettings;
  resolver: AppResolver;
  log: Logger;
  registry: Registry;
}): NativeMode {
  const { settings, resolver, log } = opts;
  const feed = createStateFeed({
    gen: randomUUID(),
    balancer: settings.balancer,
    tokenCacheMaxEntries: settings.tokenCache.maxEntries,
    now: Date.now,
  });
  const stopApps = resolver.watchApps?.(feed.apps);
  // The custom domains: a mapped host is handed to Node (reason `domain`) rather than routed by its path.
  const stopDomains = resolver.watchDomains?.(feed.domains);
  return {
    resolver: teeReplicas(resolver, feed.replicas),
    onRemember: (t) => feed.remember(t),
    start: ({ callback, spawn, usage, ...reports }) =>
      startNativeFront({
        ...reports,
        settings,
        log,
        registry: opts.registry,
        callback,
        feed,
        replicasReported: resolver.watchReplicas !== undefined,
        stopFeed: () => {
          stopApps?.();
          stopDomains?.();
        },
        ...(spawn ? { spawn } : {}),
        ...(usage ? { usage } : {}),
      }),
  };
}

export interface NativeFront {
  /** The hand-off server (what `GatewayProcess.server` is in native mode). */
  server: Server;
  supervisor: DataPlaneSupervisor;
  /** The port the data plane listens on. */
  port: number;
  check: ReadinessCheck;
  /**
   * Shutdown: `drain{handover}` and the handed connections answered with `Connection: close`, then the
   * handover period (APPHOST_GATEWAY_CONNECTION_HANDOVER_MS).
   */
  handover(): Promise<void>;
  /** Shutdown: `drain{drain}` until the child exits (bounded), then the hand-off server closes. */
  drain(): Promise<void>;
  /**
   * Design §4's SIGTERM sequence: the data plane hands its kept-alive connections back
   * (`drain{handover}`), then drains (`drain{drain}`) while Node drains `gateway`'s own calls, in
   * parallel; the hand-off socket stays open until the data plane has exited (its calls in flight were
   * handed over); then the feed stops.
   */
  shutdownSteps(gateway: { drain(): Promise<void> }): Array<{ name: string; run: () => Promise<void> }>;
  /**
   * What the ops port's /metrics serves (design §5): Node's registry and the data plane's series (asked
   * at each scrape, bounded by PROCESS_ANSWER_TIMEOUT_MS; when unanswered, the counters and histograms
   * of its last answer: supervise.ts's keptSeries) summed.
   */
  metrics: MetricsSource;
}

async function startNativeFront(
  opts: {
    settings: NativeSettings;
    log: Logger;
    registry: Registry;
    callback: (req: IncomingMessage, res: ServerResponse) => void;
    feed: StateFeed;
    /** Whether the resolver reports replicas (`watchReplicas`); without, the data plane routes as `service`. */
    replicasReported: boolean;
    stopFeed: () => void;
    spawn?: SpawnDataPlane;
    /** Replaces the real reader of the child's CPU and memory (/proc). */
    usage?: ProcessUsage;
  } & DataPlaneReports,
): Promise<NativeFront> {
  const { settings, log } = opts;
  const path = join(settings.dir, HANDOFF_SOCKET_NAME);
  const handoff = await serveHandoff({
    path,
    callback: opts.callback,
    log: log.child({ component: 'handoff' }),
    registry: opts.registry,
  });
  // The data plane does not report the port it bound (v1): a port of 0 (tests, `apphost dev`) is
  // chosen here, the way the kernel would, and given to it.
  const port = settings.port === 0 ? await freePort(settings.host) : settings.port;
  // Design §3a: the connections the data plane hands over whole, served by node mode's public server.
  const handed = createPublicServer(opts.callback);
  await listenOnSocketFile(handed.server, join(settings.dir, HANDED_SOCKET_NAME));
  const handedOver = new Counter({
    name: 'apphost_gateway_dataplane_connections_handed_over_total',
    help: "Callers' connections the native data plane handed to Node whole, their first request being an async call or one with webhookEndpoint (served as node mode serves them)",
    registers: [opts.registry],
  });
  const takeConnection = (socket: Socket) => {
    handedOver.inc();
    handed.server.emit('connection', socket);
  };
  const supervisor = superviseDataPlane({
    spawn:
      opts.spawn ??
      spawnDataPlane(
        settings.bin,
        { APPHOST_GATEWAY_DATA_PLANE_THREADS: String(settings.threads) },
        takeConnection,
      ),
    config: configFrame({ ...settings, port }, path, opts.replicasReported),
    feed: opts.feed,
    log: log.child({ component: 'dataplane' }),
    registry: opts.registry,
    drainTimeoutMs: settings.gateway.drainTimeoutMs,
    usage: opts.usage ?? procUsage(),
    ...(opts.publishLoad ? { onLoad: opts.publishLoad } : {}),
    ...(opts.recordSyncCall ? { onRecords: recordsTo(opts.recordSyncCall) } : {}),
  });
  supervisor.start();
  const front: NativeFront = {
    server: handoff.server,
    supervisor,
    port,
    check: supervisor.check,
    metrics: {
      contentType: opts.registry.contentType,
      metrics: () => mergedMetrics(opts.registry, [supervisor.askMetrics()]),
    },
    async handover() {
      supervisor.handover();
      // The handed connections as node mode's own (serve.ts): stop accepting (net.Server's close keeps the
      // idle ones), answer with Connection: close from now on.
      handed.handOver();
      NetServer.prototype.close.call(handed.server);
      await new Promise((r) => setTimeout(r, settings.connectionHandoverMs));
    },
    async drain() {
      // Node's hand-off server stays open while the data plane drains: its calls in flight were handed over.
      await supervisor.drain();
      await handoff.close();
    },
    shutdownSteps: (gateway) => [
      { name: 'data plane: hand kept-alive connections back', run: () => front.handover() },
      {
        name: 'drain data plane and gateway',
        run: async () => {
          // The handed connections as node mode drains its own: idle ones closed now, the rest after the
          // gateway's drain.
          handed.server.closeIdleConnections();
          await Promise.all([front.drain(), gateway.drain()]);
          handed.server.closeAllConnections();
        },
      },
      { name: 'stop the data plane feed', run: async () => opts.stopFeed() },
    ],
  };
  return front;
}

/** The `records` frame's records, each to `record`. */
export const recordsTo =
  (record: (call: SyncCall) => void) =>
  (records: readonly SyncCall[]): void => {
    for (const r of records) record(r);
  };

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
