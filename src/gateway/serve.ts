/**
 * Wires one gateway process: NATS, JetStream objects, the gateway's HTTP server, the run worker, the
 * ops server and the shutdown sequence. main.ts (cluster) and local/test entrypoints differ only in
 * the AppResolver they pass.
 */
import type { Server } from 'node:http';
import { Server as NetServer } from 'node:net';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { ensureSyncCallsStream } from '../runs/infrastructure.ts';
import { ensureRunsInfrastructure } from '../runs/store.ts';
import { createRunWorker, type RunWorker } from '../runs/worker.ts';
import type { AppCaller, AppResolver } from '../shared/contracts/seams.ts';
import { listen } from '../shared/listen.ts';
import type { Logger } from '../shared/log.ts';
import { registryText } from '../shared/metrics-text.ts';
import { connectNats } from '../shared/nats/connect.ts';
import { resolveReplicas } from '../shared/nats/replicas.ts';
import { retryJetStreamSetup } from '../shared/nats/setup.ts';
import { failingChecks, type OpsServer, type ReadinessCheck, startOpsServer } from '../shared/ops.ts';
import { createRunTokenVerifier, type KeySet } from '../shared/run-tokens.ts';
import { createSecretBox } from '../shared/secretbox.ts';
import { ensureWebhooksStream } from '../webhooks/stream.ts';
import { createObservedBalancer } from './balancer/metrics.ts';
import { createLoadReporter } from './balancer/reporter.ts';
import {
  balancerSettings,
  type GatewayEnv,
  gatewaySettings,
  gatewayShutdownBoundMs,
  runWorkerSettings,
} from './config.ts';
import { nativeMode, nativeSettings } from './dataplane/native.ts';
import type { ProcessUsage } from './dataplane/proc-usage.ts';
import type { SpawnDataPlane } from './dataplane/supervise.ts';
import { createGateway, type Gateway } from './gateway.ts';
import { createPublicServer, type PublicServer } from './public-server.ts';
import { type KeySetSource, watchKeySetFile } from './run-token-key-file.ts';
import { cachedRunTokenVerifier } from './token-cache.ts';

/** Bound on the first NATS connection attempt at start-up. */
export const NATS_CONNECT_TIMEOUT_MS = 10_000;
/** Bound on creating streams, buckets and the run consumer at start-up while JetStream is unavailable. */
export const NATS_SETUP_TIMEOUT_MS = 60_000;

export interface GatewayProcess {
  gateway: Gateway;
  worker: RunWorker | undefined;
  server: Server;
  /** Absent when started with `ops: false`. */
  ops: OpsServer | undefined;
  registry: Registry;
  /** Readiness checks failing now (what /readyz lists). */
  failing(): Promise<string[]>;
  nc: NatsConnection;
  port(): number;
  /** The shutdown steps, in order, for onShutdownSignal. */
  shutdownSteps(): Array<{ name: string; run: () => Promise<void> }>;
  /** Total bound for `shutdownSteps`. */
  shutdownBoundMs: number;
}

/** Verifies nothing: what the gateway checks tokens against before its key set exists (it is not ready then). */
const NO_KEYS: KeySet = { keys: [] };

function keySetFileFromEnv(env: GatewayEnv, log: Logger): KeySetSource {
  if (!env.APPHOST_RUN_TOKEN_KEYS_FILE) throw new Error('APPHOST_RUN_TOKEN_KEYS_FILE is not set');
  return watchKeySetFile({
    path: env.APPHOST_RUN_TOKEN_KEYS_FILE,
    reloadMs: env.APPHOST_RUN_TOKEN_KEYS_RELOAD_MS,
    log,
  });
}

export async function serveGateway(opts: {
  env: GatewayEnv;
  resolver: AppResolver;
  log: Logger;
  /** Where the run-token key set comes from; default: the file APPHOST_RUN_TOKEN_KEYS_FILE. */
  keys?: KeySetSource;
  /** Replaces the balancer's caller (benchmarks only). */
  callApp?: AppCaller;
  /** false: no ops server (one of several processes: the primary serves /readyz and /metrics). */
  ops?: boolean;
  /** Native mode: replaces the data plane's spawn and /proc reader (tests of faults the binary cannot produce). */
  dataPlane?: { spawn?: SpawnDataPlane; usage?: ProcessUsage };
}): Promise<GatewayProcess> {
  const { env, resolver, log } = opts;
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  // On a fresh install the management API creates the key set after the gateway starts: until then the
  // gateway runs not ready (nothing routes calls to it) instead of exiting.
  const keySource = opts.keys ?? keySetFileFromEnv(env, log);

  const nats = await connectNats({
    url: env.NATS_URL,
    name: 'apphost-gateway',
    timeoutMs: NATS_CONNECT_TIMEOUT_MS,
    // Right after an install the NATS servers may not listen yet: wait (not ready) instead of exiting.
    waitOnFirstConnect: true,
    firstConnectBoundMs: NATS_SETUP_TIMEOUT_MS,
    log: log.child({ component: 'nats' }),
  });
  const { nc } = nats;
  const replicas = resolveReplicas(env.APPHOST_NATS_REPLICAS, nc);
  const setup = { boundMs: NATS_SETUP_TIMEOUT_MS, log };
  await retryJetStreamSetup(
    'creating the RUNS, WEBHOOKS and SYNC_CALLS streams and buckets',
    // What the gateway writes: runs and their records, webhook jobs and records of sync calls.
    async () => {
      const jsm = await jetstreamManager(nc);
      await ensureRunsInfrastructure(jsm, replicas);
      await ensureWebhooksStream(jsm, replicas);
      await ensureSyncCallsStream(jsm, replicas);
    },
    setup,
  );

  const secretBox = createSecretBox(env.APPHOST_PLATFORM_KEY);
  // One balancer per process, shared by sync calls and the run worker; its load goes to the autoscaler.
  const reporter = createLoadReporter({
    nc,
    log: log.child({ component: 'load-reporter' }),
    intervalMs: env.APPHOST_LOAD_REPORT_INTERVAL_MS,
  });
  const balancer = createObservedBalancer(balancerSettings(env), registry, reporter.wake);
  // Native mode: the state the data plane needs, fed from the resolver, the balancer's replica reports
  // and the token cache (design §4).
  const native =
    env.APPHOST_GATEWAY_DATA_PLANE === 'native'
      ? nativeMode({ settings: nativeSettings(env), resolver, log, registry })
      : undefined;
  const gateway = createGateway({
    resolver: native?.resolver ?? resolver,
    verifyRunToken: cachedRunTokenVerifier(
      createRunTokenVerifier(() => keySource.current() ?? NO_KEYS, {
        leewaySeconds: env.APPHOST_RUN_TOKEN_LEEWAY_SECONDS,
      }),
      {
        ttlMs: env.APPHOST_RUN_TOKEN_CACHE_TTL_MS,
        maxEntries: env.APPHOST_RUN_TOKEN_CACHE_MAX_ENTRIES,
        ...(native ? { onRemember: native.onRemember } : {}),
      },
    ),
    nc,
    natsConnected: nats.connected,
    secretBox,
    log: log.child({ component: 'gateway' }),
    registry,
    settings: gatewaySettings(env),
    balancer,
    ...(opts.callApp ? { callApp: opts.callApp } : {}),
  });
  const worker = env.APPHOST_RUN_WORKER
    ? createRunWorker({
        nc,
        resolver,
        secretBox,
        log: log.child({ component: 'run-worker' }),
        registry,
        settings: runWorkerSettings(env),
        callApp: gateway.callApp,
        replicas,
      })
    : undefined;
  if (worker) await retryJetStreamSetup('starting the run worker', () => worker.start(), setup);
  reporter.start(balancer, worker?.held);

  const callback = gateway.callback();
  // Native mode: the data plane owns APPHOST_GATEWAY_PORT and Node serves its hand-offs on a socket (and,
  // through the same public server as node mode's, the connections it hands over whole: native.ts).
  const front = native
    ? await native.start({
        callback,
        // The calls the data plane serves: their load as reporter `<reporter>-dp`, their records.
        publishLoad: (apps) => reporter.publish(apps),
        recordSyncCall: (call) => gateway.recordSyncCall(call),
        ...opts.dataPlane,
      })
    : undefined;
  let server: Server;
  let publicServer: PublicServer | undefined;
  if (front) server = front.server;
  else {
    publicServer = createPublicServer(callback);
    server = publicServer.server;
    await listen(server, env.APPHOST_GATEWAY_PORT, env.APPHOST_GATEWAY_HOST, 'APPHOST_GATEWAY_PORT');
  }
  const checks: ReadinessCheck[] = [
    nats.readiness,
    { name: 'run-token keys', check: () => keySource.current() !== undefined },
    { name: 'gateway', check: () => !gateway.draining },
    ...(front ? [front.check] : []),
  ];
  const ops =
    opts.ops === false
      ? undefined
      : await startOpsServer({
          port: env.APPHOST_OPS_PORT,
          // Native mode: the data plane's series summed in at each scrape (design §5). Node mode: the
          // registry's text as prom-client writes it, written with fewer allocations (metrics-text.ts).
          registry: front ? front.metrics : registryText(registry),
          checks,
        });
  const port = () => {
    if (front) return front.port;
    const a = server.address();
    return typeof a === 'object' && a ? a.port : env.APPHOST_GATEWAY_PORT;
  };
  log.info(
    { port: port(), opsPort: ops?.port(), worker: !!worker, dataPlane: env.APPHOST_GATEWAY_DATA_PLANE },
    'gateway listening',
  );

  return {
    gateway,
    worker,
    server,
    ops,
    registry,
    failing: () => failingChecks(checks),
    nc,
    port,
    shutdownBoundMs: gatewayShutdownBoundMs(env),
    shutdownSteps: () => [
      { name: 'readyz→503', run: async () => ops?.drain() },
      ...(front ? front.shutdownSteps(gateway) : nodeShutdownSteps()),
      { name: 'stop run worker', run: async () => worker?.stop(env.APPHOST_RUN_STOP_TIMEOUT_MS) },
      { name: 'hand over held webhook jobs, close upstream pool', run: () => gateway.close() },
      { name: 'stop load reports', run: async () => reporter.stop() },
      { name: 'drain nats', run: () => nc.drain() },
      { name: 'close ops', run: async () => ops?.close() },
      { name: 'stop run-token key updates', run: () => keySource.stop() },
    ],
  };

  function nodeShutdownSteps() {
    return [
      {
        name: 'hand kept-alive connections back',
        run: async () => {
          // Stop accepting (net.Server's close: http.Server's would also drop idle kept-alive connections
          // a proxy may be sending on right now), then serve what still comes on open ones, each answer
          // closing its connection, until none is open or the bound passes.
          publicServer?.handOver();
          NetServer.prototype.close.call(server);
          await connectionsClosed(server, env.APPHOST_GATEWAY_CONNECTION_HANDOVER_MS);
        },
      },
      {
        name: 'drain gateway',
        run: async () => {
          server.closeIdleConnections();
          await gateway.drain();
          server.closeAllConnections();
        },
      },
    ];
  }
}

/** Resolves once `server` has no open connection, or after `boundMs`. */
async function connectionsClosed(server: Server, boundMs: number): Promise<void> {
  const deadline = Date.now() + boundMs;
  while (Date.now() < deadline) {
    const open = await new Promise<number>((resolve) => server.getConnections((_, n) => resolve(n ?? 0)));
    if (open === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}
