/**
 * `apphost management`: the management API ({base_url}) in a cluster. Kubernetes store (KUBECONFIG
 * or in-cluster), run records and webhook deliveries from NATS KV, ops endpoints on their own port.
 */
import { createServer } from 'node:http';
import { jetstreamManager } from '@nats-io/jetstream';
import { Registry } from 'prom-client';
import { z } from 'zod';
import { createKvSessionStore, openSessionsBucket } from '../dashboard/sessions.ts';
import { DEFAULT_DASHBOARD_SETTINGS } from '../dashboard/settings.ts';
import { ensureRunsBucket } from '../runs/infrastructure.ts';
import { createRunStore } from '../runs/store.ts';
import { createSyncCallReader } from '../runs/sync-call-reader.ts';
import { loadKubeConfig } from '../shared/kube/config.ts';
import { createProjectNamespaces } from '../shared/kube/projects.ts';
import { listen } from '../shared/listen.ts';
import { createLogger } from '../shared/log.ts';
import { connectNats } from '../shared/nats/connect.ts';
import { natsReplicas, resolveReplicas } from '../shared/nats/replicas.ts';
import { retryJetStreamSetup } from '../shared/nats/setup.ts';
import { startOpsServer } from '../shared/ops.ts';
import {
  commonEnv,
  deprecatedSettings,
  int,
  optionalText,
  port,
  type Renamed,
  readEnv,
  text,
} from '../shared/settings.ts';
import { onShutdownSignal } from '../shared/shutdown.ts';
import { lazyDeliveryReader } from '../webhooks/deliveries.ts';
import { findDeliveriesBucket } from '../webhooks/stream.ts';
import { createManagementApi } from './app.ts';
import { DEFAULT_SETTINGS } from './context.ts';
import { withDeadline } from './deadline.ts';
import { DeployEnv, startClusterDeploys } from './deploys.ts';
import { createKubeLogSource, DEFAULT_KUBE_LOG_SETTINGS } from './logs/kube.ts';
import { withSyncCalls } from './run-reader.ts';
import { createKubeStore } from './store/kube.ts';

/** Every setting, its env name and default (documented in docs/management.md). */
export const ManagementEnv = z.object({
  ...commonEnv,
  APPHOST_MANAGEMENT_PORT: port(8081),
  APPHOST_MANAGEMENT_HOST: text('0.0.0.0'),
  NATS_URL: text('nats://127.0.0.1:4222'),
  APPHOST_NATS_REPLICAS: natsReplicas(),
  KUBECONFIG: optionalText(),
  APPHOST_RUN_TOKEN_KEYS_NAMESPACE: text('apphost-system'),
  APPHOST_MANAGEMENT_MAX_BODY_BYTES: int(DEFAULT_SETTINGS.maxBodyBytes, { min: 1 }),
  APPHOST_MANAGEMENT_AUTH_CACHE_MS: int(DEFAULT_SETTINGS.authCacheMs),
  APPHOST_MANAGEMENT_LAST_USED_INTERVAL_MS: int(DEFAULT_SETTINGS.lastUsedIntervalMs),
  APPHOST_MANAGEMENT_MAX_RUN_TOKEN_DAYS: int(DEFAULT_SETTINGS.maxRunTokenDays, { min: 1 }),
  APPHOST_MANAGEMENT_MAX_SERVICE_ACCOUNT_DAYS: int(DEFAULT_SETTINGS.maxServiceAccountDays, { min: 1 }),
  APPHOST_MANAGEMENT_RUN_TOKEN_KEY_ACTIVATION_MS: int(DEFAULT_SETTINGS.runTokenKeyActivationMs),
  APPHOST_MANAGEMENT_BACKEND_TIMEOUT_MS: int(10_000, { min: 1 }),
  APPHOST_MANAGEMENT_PROJECT_CACHE_MS: int(2_000),
  APPHOST_MANAGEMENT_NATS_CONNECT_TIMEOUT_MS: int(10_000, { min: 1 }),
  APPHOST_MANAGEMENT_SHUTDOWN_TIMEOUT_MS: int(15_000, { min: 1 }),
  APPHOST_DASHBOARD_API_URL: z.url().optional(),
  APPHOST_DASHBOARD_SESSION_SECONDS: int(DEFAULT_DASHBOARD_SETTINGS.sessionMaxSeconds, { min: 60 }),
  APPHOST_MANAGEMENT_LOGS_MAX_LINES: int(DEFAULT_SETTINGS.logsMaxLines, { min: 1 }),
  APPHOST_MANAGEMENT_LOGS_FOLLOW_MAX_MS: int(DEFAULT_SETTINGS.logsFollowMaxMs, { min: 1_000 }),
  APPHOST_MANAGEMENT_BUILD_LOG_FOLLOW_MAX_MS: int(DEFAULT_SETTINGS.buildLogFollowMaxMs, { min: 1_000 }),
  APPHOST_MANAGEMENT_LOGS_MAX_BUFFERED_BYTES: int(DEFAULT_SETTINGS.logsMaxBufferedBytes, { min: 1_024 }),
  APPHOST_MANAGEMENT_LOGS_HEARTBEAT_MS: int(DEFAULT_SETTINGS.logsHeartbeatMs, { min: 100 }),
  APPHOST_MANAGEMENT_LOGS_LIMIT_BYTES_PER_POD: int(DEFAULT_KUBE_LOG_SETTINGS.limitBytesPerPod, {
    min: 1_024,
  }),
  APPHOST_MANAGEMENT_UPLOAD_TIMEOUT_MS: int(300_000, { min: 1_000 }),
  APPHOST_BUILD_WORKER_STOP_MS: int(10_000, { min: 0 }),
  ...DeployEnv,
});
export type ManagementEnv = z.output<typeof ManagementEnv>;

/** The first release's names, in seconds: still read, with a warning (docs/management.md, Deprecated). */
export const RENAMED_MANAGEMENT_SETTINGS: Record<string, Renamed> = Object.fromEntries(
  [
    ['AUTH_CACHE_SECONDS', 'AUTH_CACHE_MS'],
    ['LAST_USED_INTERVAL_SECONDS', 'LAST_USED_INTERVAL_MS'],
    ['RUN_TOKEN_KEY_ACTIVATION_SECONDS', 'RUN_TOKEN_KEY_ACTIVATION_MS'],
    ['BACKEND_TIMEOUT_SECONDS', 'BACKEND_TIMEOUT_MS'],
    ['PROJECT_CACHE_SECONDS', 'PROJECT_CACHE_MS'],
    ['NATS_CONNECT_TIMEOUT_SECONDS', 'NATS_CONNECT_TIMEOUT_MS'],
    ['SHUTDOWN_SECONDS', 'SHUTDOWN_TIMEOUT_MS'],
  ].map(([old, now]) => [`APPHOST_MANAGEMENT_${old}`, { name: `APPHOST_MANAGEMENT_${now}`, scale: 1000 }]),
);

export function readManagementEnv(env: NodeJS.ProcessEnv): ManagementEnv {
  return readEnv('management', ManagementEnv, env, RENAMED_MANAGEMENT_SETTINGS);
}

export async function main(env: NodeJS.ProcessEnv): Promise<void> {
  const cfg = readManagementEnv(env);
  const log = createLogger({ name: 'management', level: cfg.APPHOST_LOG_LEVEL });
  for (const warning of deprecatedSettings(env, RENAMED_MANAGEMENT_SETTINGS)) log.warn(warning);
  const registry = new Registry();
  const backendMs = cfg.APPHOST_MANAGEMENT_BACKEND_TIMEOUT_MS;

  const kc = loadKubeConfig(cfg.KUBECONFIG);
  const store = withDeadline(
    createKubeStore(kc, {
      keysNamespace: cfg.APPHOST_RUN_TOKEN_KEYS_NAMESPACE,
      namespaceCacheMs: cfg.APPHOST_MANAGEMENT_PROJECT_CACHE_MS,
    }),
    backendMs,
    'the Kubernetes API',
  );

  const nats = await connectNats({
    url: cfg.NATS_URL,
    name: 'apphost-management',
    timeoutMs: cfg.APPHOST_MANAGEMENT_NATS_CONNECT_TIMEOUT_MS,
    // Right after an install the NATS servers may not listen yet: wait instead of exiting.
    waitOnFirstConnect: true,
    firstConnectBoundMs: cfg.APPHOST_MANAGEMENT_NATS_CONNECT_TIMEOUT_MS * 6,
    log: log.child({ component: 'nats' }),
  });
  const { nc } = nats;
  const replicas = resolveReplicas(cfg.APPHOST_NATS_REPLICAS, nc);
  const jsm = await jetstreamManager(nc);
  // The API writes run records (cancel) and dashboard sessions; it only reads delivery records, which
  // the dispatcher creates.
  const runsKv = await retryJetStreamSetup(
    'opening the run-record bucket',
    () => ensureRunsBucket(jsm, replicas),
    {
      boundMs: cfg.APPHOST_MANAGEMENT_NATS_CONNECT_TIMEOUT_MS * 6,
      log,
    },
  );
  // Async runs from their store, and the sync calls the gateways record (read only, when they exist).
  const runs = withDeadline(
    withSyncCalls(createRunStore(runsKv, nc), createSyncCallReader(nc, { timeoutMs: backendMs })),
    backendMs,
    'the run store',
  );
  const deliveries = withDeadline(
    lazyDeliveryReader(() => findDeliveriesBucket(jsm)),
    backendMs,
    'the delivery store',
  );

  const dashboard = {
    ...DEFAULT_DASHBOARD_SETTINGS,
    sessionMaxSeconds: cfg.APPHOST_DASHBOARD_SESSION_SECONDS,
    // The chart gives the public API URL (ingress.api.host) as APPHOST_DEPLOY_API_URL.
    apiUrl: (cfg.APPHOST_DASHBOARD_API_URL ?? cfg.APPHOST_DEPLOY_API_URL)?.replace(/\/+$/, ''),
  };
  const sessions = withDeadline(
    createKvSessionStore(await openSessionsBucket(jsm, dashboard.sessionMaxSeconds * 1000, replicas)),
    backendMs,
    'the session store',
  );

  const projects = createProjectNamespaces(kc, { cacheMs: cfg.APPHOST_MANAGEMENT_PROJECT_CACHE_MS });
  const deploys = await retryJetStreamSetup(
    'creating the deploy streams and buckets',
    () =>
      startClusterDeploys({
        kc,
        nc,
        jsm,
        replicas,
        natsUrl: cfg.NATS_URL,
        projects,
        cfg,
        apiUrl: cfg.APPHOST_DEPLOY_API_URL ?? cfg.APPHOST_DASHBOARD_API_URL,
        log,
      }),
    { boundMs: cfg.APPHOST_MANAGEMENT_NATS_CONNECT_TIMEOUT_MS * 6, log },
  );

  const app = createManagementApi({
    store,
    runs,
    deliveries,
    logs: createKubeLogSource(
      kc,
      {
        ...DEFAULT_KUBE_LOG_SETTINGS,
        limitBytesPerPod: cfg.APPHOST_MANAGEMENT_LOGS_LIMIT_BYTES_PER_POD,
        readTimeoutMs: backendMs,
      },
      projects,
    ),
    log,
    registry,
    settings: {
      maxBodyBytes: cfg.APPHOST_MANAGEMENT_MAX_BODY_BYTES,
      authCacheMs: cfg.APPHOST_MANAGEMENT_AUTH_CACHE_MS,
      lastUsedIntervalMs: cfg.APPHOST_MANAGEMENT_LAST_USED_INTERVAL_MS,
      maxRunTokenDays: cfg.APPHOST_MANAGEMENT_MAX_RUN_TOKEN_DAYS,
      maxServiceAccountDays: cfg.APPHOST_MANAGEMENT_MAX_SERVICE_ACCOUNT_DAYS,
      runTokenKeyActivationMs: cfg.APPHOST_MANAGEMENT_RUN_TOKEN_KEY_ACTIVATION_MS,
      logsMaxLines: cfg.APPHOST_MANAGEMENT_LOGS_MAX_LINES,
      logsFollowMaxMs: cfg.APPHOST_MANAGEMENT_LOGS_FOLLOW_MAX_MS,
      buildLogFollowMaxMs: cfg.APPHOST_MANAGEMENT_BUILD_LOG_FOLLOW_MAX_MS,
      logsMaxBufferedBytes: cfg.APPHOST_MANAGEMENT_LOGS_MAX_BUFFERED_BYTES,
      logsHeartbeatMs: cfg.APPHOST_MANAGEMENT_LOGS_HEARTBEAT_MS,
    },
    dashboard: { sessions, settings: dashboard, apiUrl: () => dashboard.apiUrl },
    deploy: deploys.deploy,
  });
  // Make sure the run-token key Secret exists (first start generates it) before serving.
  await store.getRunTokenKeys();

  const server = createServer(app.callback());
  // A bundle upload may take longer than any other request.
  server.requestTimeout = Math.max(backendMs * 3, cfg.APPHOST_MANAGEMENT_UPLOAD_TIMEOUT_MS);
  await listen(server, cfg.APPHOST_MANAGEMENT_PORT, cfg.APPHOST_MANAGEMENT_HOST, 'APPHOST_MANAGEMENT_PORT');
  const ops = await startOpsServer({
    port: cfg.APPHOST_OPS_PORT,
    registry,
    checks: [
      nats.readiness,
      {
        name: 'kubernetes',
        check: () =>
          store.projectExists('readyz-probe').then(
            () => true,
            () => false,
          ),
      },
    ],
  });
  log.info({ port: cfg.APPHOST_MANAGEMENT_PORT, opsPort: ops.port() }, 'management API listening');

  onShutdownSignal(log, cfg.APPHOST_MANAGEMENT_SHUTDOWN_TIMEOUT_MS, [
    { name: 'drain', run: async () => ops.drain() },
    {
      name: 'http',
      run: () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        }),
    },
    // Unfinished builds go back to the queue: the next management pod resumes them.
    { name: 'builds', run: () => deploys.worker.stop(cfg.APPHOST_BUILD_WORKER_STOP_MS) },
    { name: 'nats', run: () => nc.drain() },
    { name: 'ops', run: () => ops.close() },
  ]);
}
