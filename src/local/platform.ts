/**
 * The platform half of local mode: the same gateway, run worker, webhook dispatcher and management API
 * as a cluster install, in this process, wired to local seams (resolver, memory store, loopback
 * webhooks allowed). Servers are created here but only listen once `start()` is called.
 */
import { createServer, type Server } from 'node:http';
import { jetstreamManager } from '@nats-io/jetstream';
import { dashboardSettings } from '../dashboard/mount.ts';
import { createKvSessionStore, openSessionsBucket } from '../dashboard/sessions.ts';
import { createObservedBalancer } from '../gateway/balancer/metrics.ts';
import { createLoadReporter } from '../gateway/balancer/reporter.ts';
import { createGateway } from '../gateway/gateway.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../gateway/settings.ts';
import { createManagementApi } from '../management/app.ts';
import type { DeployApi } from '../management/deploy-api.ts';
import { withSyncCalls } from '../management/run-reader.ts';
import { createServiceAccount } from '../management/service-accounts.ts';
import { createMemoryStore } from '../management/store/memory.ts';
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

/** Bound on connecting to NATS and creating streams and buckets at start. */
export const LOCAL_NATS_CONNECT_TIMEOUT_MS = 20_000;
/** Bound on the run worker and the webhook dispatcher finishing in-flight work on exit (then redelivered). */
export const LOCAL_STOP_BOUND_MS = 10_000;

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

    const store = createMemoryStore({ keysFile: deps.keySetFile });
    store.addProject(opts.projectId);
    // Keys may be rotated through the management API: the gateway reads the store's current set.
    let keys = deps.keySet;
    const verify = createRunTokenVerifier(() => keys);
    const verifyRunToken: RunTokenVerifier = async (token) => {
      keys = await store.getRunTokenKeys();
      return verify(token);
    };

    // As in a cluster: one balancer for sync calls and async runs, its load reported to the autoscaler.
    const reporter = createLoadReporter({
      nc,
      log: log.child({ component: 'load-reporter' }),
      intervalMs: opts.loadReportIntervalMs,
    });
    const balancer = createObservedBalancer(opts.balancer, registry, reporter.wake);
    const gateway = createGateway({
      balancer,
      resolver: deps.resolver,
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
    const apiServer = createServer(gateway.callback());
    const managementServer = createServer(management.callback());

    let ops: Awaited<ReturnType<typeof startOpsServer>> | undefined;
    const platform: LocalPlatform = {
      store,
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
        platform.apiPort = await listen(apiServer, opts.port, opts.host, '--port');
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
          registry,
          checks: platform.checks,
        });
        platform.opsPort = ops.port();
        log.info(
          { apiPort: platform.apiPort, managementPort: platform.managementPort, opsPort: platform.opsPort },
          'local platform listening',
        );
      },
      async stop() {
        ops?.drain();
        await gateway.drain();
        await Promise.all([close(apiServer), close(managementServer)]);
        await Promise.all([worker.stop(LOCAL_STOP_BOUND_MS), dispatcher.stop(LOCAL_STOP_BOUND_MS)]);
        await gateway.close();
        reporter.stop();
        await Promise.race([
          nc.drain(),
          new Promise((r) => setTimeout(r, LOCAL_STOP_BOUND_MS).unref()),
        ]).catch(() => {});
        await nc.close();
        await ops?.close();
      },
    };
    return platform;
  } catch (err) {
    await nc.close();
    throw err;
  }
}
