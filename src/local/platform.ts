/**
 * The platform half of local mode: the same gateway, run worker, webhook dispatcher and management API
 * as a cluster install, in this process, wired to local seams (resolver, memory store, loopback
 * webhooks allowed). Servers are created here but only listen once `start()` is called.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { dashboardSettings } from '../dashboard/mount.ts';
import { createKvSessionStore, openSessionsBucket } from '../dashboard/sessions.ts';
import { createObservedBalancer } from '../gateway/balancer/metrics.ts';
import { createLoadReporter } from '../gateway/balancer/reporter.ts';
import { type NativeFront, type NativeMode, nativeMode } from '../gateway/dataplane/native.ts';
import { createGateway } from '../gateway/gateway.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../gateway/settings.ts';
import { cachedRunTokenVerifier, DEFAULT_RUN_TOKEN_CACHE } from '../gateway/token-cache.ts';
import { createManagementApi } from '../management/app.ts';
import type { DeployApi } from '../management/deploy-api.ts';
import { withSyncCalls } from '../management/run-reader.ts';
import { createServiceAccount } from '../management/service-accounts.ts';
import { ensureSyncCallsStream } from '../runs/infrastructure.ts';
import { DEFAULT_RUN_WORKER_SETTINGS } from '../runs/settings.ts';
import { createRunStore, ensureRunsInfrastructure } from '../runs/store.ts';
import { createSyncCallReader } from '../runs/sync-call-reader.ts';
import { createRunWorker } from '../runs/worker.ts';
import { listen } from '../shared/listen.ts';
import { connectNats } from '../shared/nats/connect.ts';
import { resolveReplicas } from '../shared/nats/replicas.ts';
import { startOpsServer } from '../shared/ops.ts';
import { createRunTokenVerifier, type RunTokenVerifier } from '../shared/run-tokens.ts';
import { createSecretBox } from '../shared/secretbox.ts';
import { createDeliveryStore } from '../webhooks/deliveries.ts';
import { createWebhookDispatcher } from '../webhooks/dispatcher.ts';
import { DEFAULT_WEBHOOK_SETTINGS } from '../webhooks/settings.ts';
import { ensureWebhooksStream, openDeliveriesBucket } from '../webhooks/stream.ts';
import { balancerLiveness } from './app-liveness.ts';
import { urlHost } from './credentials.ts';
import { LOCAL_WEBHOOK_ALLOW_CIDRS, type LocalPlatform, type PlatformDeps } from './dev.ts';
import type { DevOptions } from './options.ts';

/** Bound on connecting to NATS and creating streams and buckets at start. */
export const LOCAL_NATS_CONNECT_TIMEOUT_MS = 20_000;
/** Bound on the run worker and the webhook dispatcher finishing in-flight work on exit (then redelivered). */
export const LOCAL_STOP_BOUND_MS = 10_000;
/**
 * Bound on the native data plane being ready at start (spawned, hello, config and state applied,
 * listening on --port); it takes well under a second. A data plane that exits first fails the start at once.
 */
export const LOCAL_DATA_PLANE_READY_TIMEOUT_MS = 30_000;

function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}

export async function startLocalPlatform(deps: PlatformDeps): Promise<LocalPlatform> {
  const { opts, log, registry } = deps;
  const nats = await connectNats({
    url: deps.natsUrl,
    name: 'apphost-dev',
    timeoutMs: LOCAL_NATS_CONNECT_TIMEOUT_MS,
    log: log.child({ component: 'nats' }),
  });
  const { nc } = nats;
  let cleanupNative: (() => void) | undefined;
  try {
    const jsm = await jetstreamManager(nc, { timeout: LOCAL_NATS_CONNECT_TIMEOUT_MS });
    // A private nats-server keeps one copy; an external cluster (NATS_URL) gets min(3, its size).
    const replicas = resolveReplicas('auto', nc);
    const runsKv = await ensureRunsInfrastructure(jsm, replicas);
    await ensureWebhooksStream(jsm, replicas);
    await ensureSyncCallsStream(jsm, replicas);
    const deliveriesKv = await openDeliveriesBucket(jsm, replicas);
    const runStore = createRunStore(runsKv, nc);
    const secretBox = createSecretBox(deps.platformKey);

    const { store } = deps;
    // Keys may be rotated through the management API: the gateway reads the store's current set.
    let keys = deps.keySet;
    const verify = createRunTokenVerifier(() => keys);
    const verifyFromStore: RunTokenVerifier = async (token) => {
      keys = await store.getRunTokenKeys();
      return verify(token);
    };
    const native = opts.dataPlane.mode === 'native' ? localNativeMode(opts.dataPlane, deps) : undefined;
    cleanupNative = native?.removeDir;
    const verifyRunToken = native
      ? cachedRunTokenVerifier(verifyFromStore, {
          ...DEFAULT_RUN_TOKEN_CACHE,
          onRemember: native.mode.onRemember,
        })
      : verifyFromStore;

    // As in a cluster: one balancer for sync calls and async runs, its load reported to the autoscaler.
    const reporter = createLoadReporter({
      nc,
      log: log.child({ component: 'load-reporter' }),
      intervalMs: opts.loadReportIntervalMs,
    });
    const balancer = createObservedBalancer(opts.balancer, registry, reporter.wake);
    const gateway = createGateway({
      balancer,
      resolver: native?.mode.resolver ?? deps.resolver,
      verifyRunToken,
      nc,
      secretBox,
      log: log.child({ component: 'gateway' }),
      registry,
      settings: DEFAULT_GATEWAY_SETTINGS,
      runStore,
    });
    const worker = createRunWorker({
      nc,
      resolver: deps.resolver,
      secretBox,
      log: log.child({ component: 'run-worker' }),
      registry,
      settings: {
        ...DEFAULT_RUN_WORKER_SETTINGS,
        ...(opts.runConcurrency ? { concurrency: opts.runConcurrency } : {}),
      },
      replicas,
      callApp: gateway.callApp,
    });
    const dispatcher = createWebhookDispatcher({
      nc,
      secretBox,
      log: log.child({ component: 'webhooks' }),
      registry,
      settings: { ...DEFAULT_WEBHOOK_SETTINGS, allowCidrs: LOCAL_WEBHOOK_ALLOW_CIDRS },
      deliveriesKv,
      replicas,
    });
    const settings = dashboardSettings();
    const sessionsKv = await openSessionsBucket(jsm, settings.sessionMaxSeconds * 1000, replicas);
    const deploy: DeployApi | undefined = deps.deploys
      ? {
          deployments: deps.deploys.deployments,
          builds: deps.deploys.builds,
          logs: deps.deploys.logs,
          target: deps.deploys.target,
        }
      : undefined;
    const management = createManagementApi({
      store,
      runs: withSyncCalls(runStore, createSyncCallReader(nc, { timeoutMs: LOCAL_NATS_CONNECT_TIMEOUT_MS })),
      deliveries: createDeliveryStore(deliveriesKv),
      logs: deps.logs,
      log: log.child({ component: 'management' }),
      registry,
      dashboard: {
        sessions: createKvSessionStore(sessionsKv),
        settings,
        apiUrl: () => `http://${urlHost(opts.host)}:${platform.apiPort}`,
        liveness: balancerLiveness(balancer),
      },
      ...(deploy ? { deploy } : {}),
    });
    const apiServer = native ? undefined : createServer(gateway.callback());
    let front: NativeFront | undefined;
    const managementServer = createServer(management.callback());

    let ops: Awaited<ReturnType<typeof startOpsServer>> | undefined;
    const platform: LocalPlatform = {
      apiPort: opts.port,
      managementPort: opts.managementPort,
      opsPort: opts.opsPort,
      checks: [nats.readiness],
      async createServiceAccountToken(projectId, name, expiresAt) {
        return (await createServiceAccount(store, projectId, name, expiresAt)).token;
      },
      async start() {
        reporter.start(balancer, worker.held);
        await worker.start();
        await dispatcher.start();
        if (apiServer) platform.apiPort = await listen(apiServer, opts.port, opts.host, '--port');
        else if (native) {
          front = await native.mode.start({
            callback: gateway.callback(),
            // The calls the data plane serves: their load (reporter `<reporter>-dp`) and their records.
            publishLoad: (apps) => reporter.publish(apps),
            recordSyncCall: (call) => gateway.recordSyncCall(call),
          });
          platform.checks.push(front.check);
          await dataPlaneReady(front, native.bin);
          platform.apiPort = front.port;
        }
        if (deploy) deploy.apiUrl = `http://${urlHost(opts.host)}:${platform.apiPort}`;
        platform.managementPort = await listen(
          managementServer,
          opts.managementPort,
          opts.host,
          '--management-port',
        );
        ops = await startOpsServer({
          port: opts.opsPort,
          host: opts.host,
          // Native: the data plane's series summed in at each scrape, as in a cluster (native.ts).
          registry: front ? front.metrics : registry,
          checks: platform.checks,
        });
        platform.opsPort = ops.port();
        log.info(
          {
            apiPort: platform.apiPort,
            managementPort: platform.managementPort,
            opsPort: platform.opsPort,
            dataPlane: opts.dataPlane.mode,
          },
          'local platform listening',
        );
      },
      async stop() {
        ops?.drain();
        if (front) for (const step of front.shutdownSteps(gateway)) await step.run();
        else await gateway.drain();
        await Promise.all([apiServer ? close(apiServer) : undefined, close(managementServer)]);
        await Promise.all([worker.stop(LOCAL_STOP_BOUND_MS), dispatcher.stop(LOCAL_STOP_BOUND_MS)]);
        await gateway.close();
        reporter.stop();
        await Promise.race([
          nc.drain(),
          new Promise((r) => setTimeout(r, LOCAL_STOP_BOUND_MS).unref()),
        ]).catch(() => {});
        await nc.close();
        await ops?.close();
        native?.removeDir();
      },
    };
    return platform;
  } catch (err) {
    cleanupNative?.();
    await nc.close();
    throw err;
  }
}

/**
 * The native data plane in front of the gateway (APPHOST_GATEWAY_DATA_PLANE=native, docs/local.md): the
 * cluster's wiring (native.ts) with local settings, fed from the local resolver (apps, replicas, the
 * store's custom domains) and the token cache. Its socket folder is a temporary one unless set.
 */
function localNativeMode(
  dp: Extract<DevOptions['dataPlane'], { mode: 'native' }>,
  deps: Pick<PlatformDeps, 'opts' | 'resolver' | 'log' | 'registry'>,
): { mode: NativeMode; bin: string; removeDir(): void } {
  const { opts } = deps;
  const dir = dp.dir ?? mkdtempSync(join(tmpdir(), 'apphost-dev-'));
  const mode = nativeMode({
    settings: {
      bin: dp.bin,
      dir,
      threads: dp.threads,
      host: opts.host,
      port: opts.port,
      gateway: DEFAULT_GATEWAY_SETTINGS,
      balancer: opts.balancer,
      routing: 'endpoints',
      // No load balancer in front: on stop, kept-alive connections close at once, as in node mode.
      connectionHandoverMs: 0,
      tokenCache: DEFAULT_RUN_TOKEN_CACHE,
      loadReportIntervalMs: opts.loadReportIntervalMs,
      logLevel: dp.logLevel,
    },
    resolver: deps.resolver,
    log: deps.log,
    registry: deps.registry,
  });
  return {
    mode,
    bin: dp.bin,
    removeDir: () => {
      if (!dp.dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Resolves once the data plane is ready; throws when it exits first or LOCAL_DATA_PLANE_READY_TIMEOUT_MS passes. */
async function dataPlaneReady(front: NativeFront, bin: string): Promise<void> {
  const deadline = Date.now() + LOCAL_DATA_PLANE_READY_TIMEOUT_MS;
  while (!front.supervisor.ready()) {
    // Started at once and running until it exits: no pid means it exited (its error is logged above).
    if (front.supervisor.pid() === undefined)
      throw new Error(
        `the native data plane (APPHOST_GATEWAY_DATA_PLANE_BIN=${bin}) exited at start; see its log line above (a port already in use: --port)`,
      );
    if (Date.now() > deadline)
      throw new Error(
        `the native data plane (APPHOST_GATEWAY_DATA_PLANE_BIN=${bin}) was not ready within ${LOCAL_DATA_PLANE_READY_TIMEOUT_MS / 1000} s`,
      );
    await new Promise((r) => setTimeout(r, 20));
  }
}
