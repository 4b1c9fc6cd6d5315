/** The gateway process's environment, parsed once in main.ts (names and defaults: docs/gateway.md). */
import { z } from 'zod';
import { DEFAULT_RUN_WORKER_SETTINGS, type RunWorkerSettings } from '../runs/settings.ts';
import { natsReplicas } from '../shared/nats/replicas.ts';
import { DEFAULT_RUN_TOKEN_LEEWAY_SECONDS, MAX_RUN_TOKEN_LEEWAY_SECONDS } from '../shared/run-tokens.ts';
import {
  bool,
  commonEnv,
  int,
  optionalText,
  port,
  readEnv,
  SettingsError,
  text,
} from '../shared/settings.ts';
import { type BalancerSettings, DEFAULT_BALANCER_SETTINGS } from './balancer/balancer.ts';
import { DEFAULT_GATEWAY_KUBE_SETTINGS, type GatewayKubeSettings } from './kube-settings.ts';
import { DEFAULT_GATEWAY_SETTINGS, type GatewaySettings } from './settings.ts';
import { DEFAULT_RUN_TOKEN_CACHE } from './token-cache.ts';

const G = DEFAULT_GATEWAY_SETTINGS;
const B = DEFAULT_BALANCER_SETTINGS;
const W = DEFAULT_RUN_WORKER_SETTINGS;
const K = DEFAULT_GATEWAY_KUBE_SETTINGS;

/** The balancer's variables (docs/scaling.md), read by the gateway and by `apphost dev`. */
export const balancerEnv = {
  APPHOST_GATEWAY_QUEUE_TIMEOUT_MS: int(B.queueTimeoutMs, { min: 1 }),
  APPHOST_GATEWAY_COLD_START_TIMEOUT_MS: int(B.coldStartTimeoutMs, { min: 1 }),
  APPHOST_GATEWAY_QUEUE_DEPTH_FACTOR: int(B.queueDepthFactor, { min: 1 }),
  APPHOST_GATEWAY_MAX_QUEUE_PER_APP: int(B.maxQueuePerApp, { min: 1 }),
  APPHOST_GATEWAY_CAPACITY_BLOCK_MS: int(B.capacityBlockMs, { min: 1 }),
  APPHOST_GATEWAY_UNREACHABLE_BLOCK_MS: int(B.unreachableBlockMs, { min: 1 }),
  APPHOST_GATEWAY_MAX_RETRIES: int(B.maxRetries),
  APPHOST_GATEWAY_RETRY_AFTER_SECONDS: int(G.retryAfterSeconds, { min: 1 }),
  APPHOST_LOAD_REPORT_INTERVAL_MS: int(1_000, { min: 100 }),
};
const BalancerEnv = z.object(balancerEnv);

/** Upper bound on APPHOST_GATEWAY_DATA_PLANE_THREADS (the data plane's own bound, main.rs MAX_THREADS). */
export const MAX_DATA_PLANE_THREADS = 64;

/**
 * Which data plane serves the gateway's port, and its tokio threads (docs/design/native-data-plane.md):
 * read by the gateway and by `apphost dev` (which has no default binary: npm installs ship none).
 */
export const dataPlaneEnv = {
  APPHOST_GATEWAY_DATA_PLANE: z.enum(['node', 'native']).default('node'),
  APPHOST_GATEWAY_DATA_PLANE_THREADS: int(1, { min: 1, max: MAX_DATA_PLANE_THREADS }),
};

/** `APPHOST_GATEWAY_PROCESSES`: a count, or `auto` (one per CPU the process may use). */
export type ProcessesSetting = 'auto' | number;
export const MAX_GATEWAY_PROCESSES = 64;

const processesSetting = () =>
  z
    .string()
    .optional()
    .transform((raw, ctx): ProcessesSetting => {
      const v = raw?.trim() ?? '';
      if (v === '') return 1;
      if (v === 'auto') return 'auto';
      const n = Number(v);
      if (Number.isInteger(n) && n >= 1 && n <= MAX_GATEWAY_PROCESSES) return n;
      ctx.addIssue({
        code: 'custom',
        message: `must be "auto" or a whole number 1..${MAX_GATEWAY_PROCESSES}`,
      });
      return z.NEVER;
    });

export const GatewayEnv = z.object({
  ...commonEnv,
  NATS_URL: text('nats://127.0.0.1:4222'),
  KUBECONFIG: optionalText(),
  APPHOST_NATS_REPLICAS: natsReplicas(),
  APPHOST_GATEWAY_PORT: port(8080),
  APPHOST_GATEWAY_PROCESSES: processesSetting(),
  APPHOST_GATEWAY_HOST: text('0.0.0.0'),
  APPHOST_PLATFORM_KEY: z
    .string({ error: 'is required (the platform key that seals webhook secrets)' })
    .min(16, 'must be at least 16 characters'),
  // Unset (the chart): the gateway watches the key Secret in APPHOST_RUN_TOKEN_KEYS_NAMESPACE instead.
  APPHOST_RUN_TOKEN_KEYS_FILE: optionalText(),
  APPHOST_RUN_TOKEN_KEYS_NAMESPACE: text('apphost-system'),
  APPHOST_RUN_TOKEN_KEYS_RELOAD_MS: int(30_000, { min: 1_000 }),
  APPHOST_RUN_TOKEN_CACHE_TTL_MS: int(DEFAULT_RUN_TOKEN_CACHE.ttlMs),
  APPHOST_RUN_TOKEN_LEEWAY_SECONDS: int(DEFAULT_RUN_TOKEN_LEEWAY_SECONDS, {
    max: MAX_RUN_TOKEN_LEEWAY_SECONDS,
  }),
  APPHOST_RUN_TOKEN_CACHE_MAX_ENTRIES: int(DEFAULT_RUN_TOKEN_CACHE.maxEntries),
  APPHOST_RUN_WORKER: bool(true),
  APPHOST_GATEWAY_FUNCTIONS_TTL_MS: int(60_000),
  APPHOST_GATEWAY_FUNCTIONS_TIMEOUT_MS: int(2_000, { min: 1 }),
  APPHOST_GATEWAY_MAX_BODY_BYTES: int(G.maxBodyBytes, { min: 1 }),
  APPHOST_GATEWAY_SYNC_TIMEOUT_MS: int(G.syncTimeoutMs, { min: 1 }),
  APPHOST_GATEWAY_STREAM_IDLE_TIMEOUT_MS: int(G.streamIdleTimeoutMs),
  APPHOST_GATEWAY_PUBLISH_TIMEOUT_MS: int(G.publishTimeoutMs, { min: 1 }),
  APPHOST_GATEWAY_DRAIN_TIMEOUT_MS: int(G.drainTimeoutMs),
  APPHOST_GATEWAY_CONNECTION_HANDOVER_MS: int(3_000),
  APPHOST_WEBHOOK_MAX_BODY_BYTES: int(G.maxWebhookBodyBytes, { min: 1 }),
  APPHOST_GATEWAY_WEBHOOK_OUTBOX_MAX_JOBS: int(G.webhookOutboxMaxJobs),
  APPHOST_GATEWAY_WEBHOOK_OUTBOX_MAX_BYTES: int(G.webhookOutboxMaxBytes),
  APPHOST_GATEWAY_WEBHOOK_OUTBOX_CLOSE_MS: int(G.webhookOutboxCloseMs),
  APPHOST_GATEWAY_SYNC_RECORDS_PER_APP_PER_SECOND: int(G.syncRecordsPerAppPerSecond),
  APPHOST_GATEWAY_SYNC_RECORDS_PER_SECOND: int(G.syncRecordsPerSecond, { min: 1 }),
  APPHOST_RUN_CONSUMER: text(W.consumerName),
  APPHOST_RUN_CONCURRENCY: int(W.concurrency, { min: 1 }),
  APPHOST_RUN_ACK_WAIT_MS: int(W.ackWaitMs, { min: 300 }),
  APPHOST_RUN_MAX_EXECUTIONS: int(W.maxExecutions, { min: 1 }),
  APPHOST_RUN_RESULT_MAX_BYTES: int(W.maxResultBytes),
  APPHOST_RUN_STOP_TIMEOUT_MS: int(25_000),
  APPHOST_RUN_CAPACITY_RETRY_MS: int(W.capacityRetryMs, { min: 100 }),
  APPHOST_RUN_MAX_QUEUED_MS: int(W.maxQueuedMs, { min: 1_000 }),
  APPHOST_RUN_WRITE_TIMEOUT_MS: int(W.writeTimeoutMs, { min: 1_000 }),
  ...balancerEnv,
  APPHOST_GATEWAY_ROUTING: z.enum(['endpoints', 'service']).default('endpoints'),
  APPHOST_CLUSTER_DOMAIN: optionalText(),
  APPHOST_GATEWAY_KUBE_REQUEST_TIMEOUT_MS: int(K.requestTimeoutMs, { min: 1 }),
  APPHOST_GATEWAY_WATCH_TIMEOUT_SECONDS: int(K.watchTimeoutSeconds, { min: 1 }),
  APPHOST_GATEWAY_WATCH_IDLE_TIMEOUT_MS: int(K.watchIdleTimeoutMs, { min: 1_000 }),
  APPHOST_GATEWAY_CACHE_SYNC_TIMEOUT_MS: int(K.syncTimeoutMs, { min: 1 }),
  // The native data plane (docs/design/native-data-plane.md): `native` needs APPHOST_GATEWAY_PROCESSES=1.
  ...dataPlaneEnv,
  APPHOST_GATEWAY_DATA_PLANE_BIN: text('/app/bin/apphost-dataplane'),
  APPHOST_GATEWAY_DATA_PLANE_DIR: text('/run/apphost'),
});
export type GatewayEnv = z.infer<typeof GatewayEnv>;

/** What the gateway allows itself after SIGTERM, in total (the chart derives the pod's grace from it). */
export function gatewayShutdownBoundMs(e: GatewayEnv): number {
  return (
    e.APPHOST_GATEWAY_CONNECTION_HANDOVER_MS +
    e.APPHOST_GATEWAY_DRAIN_TIMEOUT_MS +
    e.APPHOST_RUN_STOP_TIMEOUT_MS +
    e.APPHOST_GATEWAY_WEBHOOK_OUTBOX_CLOSE_MS +
    10_000
  );
}

export function parseGatewayEnv(env: NodeJS.ProcessEnv): GatewayEnv {
  const cfg = readEnv('gateway', GatewayEnv, env);
  // v1 of the native data plane feeds one Node process and hands calls to it (design §1): several
  // processes, `auto` included (its count depends on the machine), are refused at start.
  if (cfg.APPHOST_GATEWAY_DATA_PLANE === 'native' && cfg.APPHOST_GATEWAY_PROCESSES !== 1)
    throw new SettingsError('gateway', [
      {
        variable: 'APPHOST_GATEWAY_DATA_PLANE',
        message: `'native' needs APPHOST_GATEWAY_PROCESSES=1 (set: '${cfg.APPHOST_GATEWAY_PROCESSES}'): one Node process behind the data plane in v1`,
      },
    ]);
  return cfg;
}

export function gatewaySettings(e: GatewayEnv): GatewaySettings {
  return {
    maxBodyBytes: e.APPHOST_GATEWAY_MAX_BODY_BYTES,
    syncTimeoutMs: e.APPHOST_GATEWAY_SYNC_TIMEOUT_MS,
    streamIdleTimeoutMs: e.APPHOST_GATEWAY_STREAM_IDLE_TIMEOUT_MS,
    publishTimeoutMs: e.APPHOST_GATEWAY_PUBLISH_TIMEOUT_MS,
    retryAfterSeconds: e.APPHOST_GATEWAY_RETRY_AFTER_SECONDS,
    maxWebhookBodyBytes: e.APPHOST_WEBHOOK_MAX_BODY_BYTES,
    drainTimeoutMs: e.APPHOST_GATEWAY_DRAIN_TIMEOUT_MS,
    webhookPublishTimeoutMs: G.webhookPublishTimeoutMs,
    webhookOutboxMaxJobs: e.APPHOST_GATEWAY_WEBHOOK_OUTBOX_MAX_JOBS,
    webhookOutboxMaxBytes: e.APPHOST_GATEWAY_WEBHOOK_OUTBOX_MAX_BYTES,
    webhookOutboxCloseMs: e.APPHOST_GATEWAY_WEBHOOK_OUTBOX_CLOSE_MS,
    syncRecordsPerAppPerSecond: e.APPHOST_GATEWAY_SYNC_RECORDS_PER_APP_PER_SECOND,
    syncRecordsPerSecond: e.APPHOST_GATEWAY_SYNC_RECORDS_PER_SECOND,
  };
}

export function balancerSettings(e: z.output<typeof BalancerEnv>): BalancerSettings {
  return {
    queueTimeoutMs: e.APPHOST_GATEWAY_QUEUE_TIMEOUT_MS,
    coldStartTimeoutMs: e.APPHOST_GATEWAY_COLD_START_TIMEOUT_MS,
    queueDepthFactor: e.APPHOST_GATEWAY_QUEUE_DEPTH_FACTOR,
    maxQueuePerApp: e.APPHOST_GATEWAY_MAX_QUEUE_PER_APP,
    capacityBlockMs: e.APPHOST_GATEWAY_CAPACITY_BLOCK_MS,
    unreachableBlockMs: e.APPHOST_GATEWAY_UNREACHABLE_BLOCK_MS,
    maxRetries: e.APPHOST_GATEWAY_MAX_RETRIES,
    retryAfterSeconds: e.APPHOST_GATEWAY_RETRY_AFTER_SECONDS,
  };
}

export function gatewayKubeSettings(e: GatewayEnv): GatewayKubeSettings {
  return {
    requestTimeoutMs: e.APPHOST_GATEWAY_KUBE_REQUEST_TIMEOUT_MS,
    watchTimeoutSeconds: e.APPHOST_GATEWAY_WATCH_TIMEOUT_SECONDS,
    watchIdleTimeoutMs: e.APPHOST_GATEWAY_WATCH_IDLE_TIMEOUT_MS,
    syncTimeoutMs: e.APPHOST_GATEWAY_CACHE_SYNC_TIMEOUT_MS,
    backoff: K.backoff,
  };
}

export function runWorkerSettings(e: GatewayEnv): RunWorkerSettings {
  return {
    ...W,
    consumerName: e.APPHOST_RUN_CONSUMER,
    capacityRetryMs: e.APPHOST_RUN_CAPACITY_RETRY_MS,
    maxQueuedMs: e.APPHOST_RUN_MAX_QUEUED_MS,
    concurrency: e.APPHOST_RUN_CONCURRENCY,
    ackWaitMs: e.APPHOST_RUN_ACK_WAIT_MS,
    maxExecutions: e.APPHOST_RUN_MAX_EXECUTIONS,
    writeTimeoutMs: e.APPHOST_RUN_WRITE_TIMEOUT_MS,
    maxWebhookBodyBytes: e.APPHOST_WEBHOOK_MAX_BODY_BYTES,
    maxResultBytes: e.APPHOST_RUN_RESULT_MAX_BYTES,
  };
}
