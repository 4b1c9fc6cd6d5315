/**
 * Every JetStream stream and KV bucket of the platform, each configured here and nowhere else, and the
 * one "ensure" policy they share: create what is missing; when it exists, update the updatable fields
 * stated here that differ (so a new release's config reaches an existing install); leave every other
 * field as an operator set it; the replica count follows replicas.ts. Each process ensures only what it
 * writes (docs/architecture.md, NATS).
 */
import {
  type ConsumerConfig,
  DiscardPolicy,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from '@nats-io/jetstream';
import { type KV, Kvm, type KvOptions } from '@nats-io/kv';
import {
  ARTIFACTS_BUCKET,
  BUILD_LOGS_STREAM,
  BUILDS_BUCKET,
  BUILDS_STREAM,
  DEPENDENCY_SETS_BUCKET,
} from '../contracts/builds.ts';
import {
  RUNS_BUCKET,
  RUNS_STREAM,
  SYNC_CALLS_STREAM,
  WEBHOOK_DELIVERIES_BUCKET,
  WEBHOOKS_STREAM,
} from '../contracts/messaging.ts';
import type { Logger } from '../log.ts';
import { ensureStreamReplicas, type Replicas, SINGLE_REPLICA } from './replicas.ts';

/** JetStream durations are nanoseconds. */
export const nanos = (ms: number) => ms * 1_000_000;

/** How many copies every stream and bucket gets (replicas.ts, the APPHOST_NATS_REPLICAS setting). */
export type { Replicas };

/** Window in which a re-published RunJob with the same `Nats-Msg-Id` (request id) is dropped. */
export const RUNS_DUPLICATE_WINDOW_MS = 5 * 60_000;
/** Largest accepted run message (request body + headers, base64) the stream stores. */
export const RUNS_MAX_MSG_BYTES = 8 * 1024 * 1024;
/** How long a run record is kept after its last change (KV max age). */
export const RUN_RECORD_RETENTION_MS = 7 * 24 * 3600_000;
export const WEBHOOKS_SUBJECTS = 'apphost.webhooks.>';
/** A retried publish of the same job within this window is stored once (spec: ≥ 2 min). */
export const WEBHOOKS_DUPLICATE_WINDOW_MS = 10 * 60_000;
/** How long a delivery record is kept for the management API. */
export const WEBHOOK_DELIVERIES_TTL_MS = 7 * 24 * 3_600_000;

type StreamSpec = Pick<StreamConfig, 'name'> & Partial<StreamConfig>;

/** Accepted async runs (written by the gateway, consumed by the run worker). */
export const runsStream = (): StreamSpec => ({
  name: RUNS_STREAM,
  subjects: ['apphost.runs.>'],
  retention: RetentionPolicy.Workqueue,
  storage: StorageType.File,
  duplicate_window: nanos(RUNS_DUPLICATE_WINDOW_MS),
  max_msg_size: RUNS_MAX_MSG_BYTES,
});

/** Webhook deliveries to make (written by the gateway and the run worker, consumed by the dispatcher). */
export const webhooksStream = (): StreamSpec => ({
  name: WEBHOOKS_STREAM,
  subjects: [WEBHOOKS_SUBJECTS],
  retention: RetentionPolicy.Workqueue,
  storage: StorageType.File,
  duplicate_window: nanos(WEBHOOKS_DUPLICATE_WINDOW_MS),
});

/** Sync-call records kept per app (the newest; older ones are discarded). */
export const SYNC_CALLS_PER_APP = 100;
/** A sync-call record is small (no body): larger messages are refused by the stream. */
export const SYNC_CALLS_MAX_MSG_BYTES = 8 * 1024;
/** Upper bound of the whole stream (oldest discarded first). */
export const SYNC_CALLS_MAX_BYTES = 64 * 1024 * 1024;

/**
 * Recorded sync calls (published by the gateway without waiting for an ack, read by the management
 * API with direct gets): a bounded, newest-first view, never a queue.
 */
export const syncCallsStream = (): StreamSpec => ({
  name: SYNC_CALLS_STREAM,
  subjects: ['apphost.calls.>'],
  retention: RetentionPolicy.Limits,
  storage: StorageType.File,
  discard: DiscardPolicy.Old,
  max_msgs_per_subject: SYNC_CALLS_PER_APP,
  max_age: nanos(RUN_RECORD_RETENTION_MS),
  max_bytes: SYNC_CALLS_MAX_BYTES,
  max_msg_size: SYNC_CALLS_MAX_MSG_BYTES,
  allow_direct: true,
});

type BucketSpec = { name: string } & Partial<KvOptions>;

/** Run records (written by the gateway, the run worker and the management API's cancel). */
export const runRecordsBucket = (): BucketSpec => ({
  name: RUNS_BUCKET,
  history: 1,
  ttl: RUN_RECORD_RETENTION_MS,
  storage: StorageType.File,
});

/** Webhook delivery records (written by the dispatcher, read by the management API). */
export const deliveriesBucket = (): BucketSpec => ({
  name: WEBHOOK_DELIVERIES_BUCKET,
  history: 1,
  ttl: WEBHOOK_DELIVERIES_TTL_MS,
  storage: StorageType.File,
});

/** Dashboard sign-ins (written by the management API's dashboard); a session lives at most `ttlMs`. */
export const DASHBOARD_SESSIONS_BUCKET = 'apphost_dashboard_sessions';
export const dashboardSessionsBucket = (ttlMs: number): BucketSpec => ({
  name: DASHBOARD_SESSIONS_BUCKET,
  history: 1,
  ttl: ttlMs,
  storage: StorageType.File,
});

export function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; message?: string; api_error?: { err_code?: number } };
  return (
    e?.name === 'StreamNotFoundError' ||
    e?.name === 'ConsumerNotFoundError' ||
    e?.api_error?.err_code === 10059 ||
    e?.api_error?.err_code === 10014 ||
    /(stream|consumer) not found/i.test(String(e?.message))
  );
}

/**
 * Fields JetStream fixes when an object is created (stated here, never updated), and the replica count,
 * which follows its own rule (replicas.ts: raised by default, lowered only when set explicitly).
 */
const CREATE_ONLY = new Set(['retention', 'storage', 'ack_policy', 'deliver_policy', 'num_replicas']);

/** The updatable fields of `wanted` whose value differs in `actual`. */
function differing<T extends object>(wanted: Partial<T>, actual: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(wanted) as Array<[keyof T, T[keyof T]]>) {
    if (!CREATE_ONLY.has(String(k)) && JSON.stringify(actual[k]) !== JSON.stringify(v)) out[k] = v;
  }
  return out;
}

export async function ensureStream(
  jsm: JetStreamManager,
  spec: StreamSpec,
  replicas: Replicas = SINGLE_REPLICA,
  log?: Logger,
): Promise<void> {
  const { name, ...wanted } = spec;
  let info: Awaited<ReturnType<JetStreamManager['streams']['info']>>;
  try {
    info = await jsm.streams.info(name);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    try {
      await jsm.streams.add({ ...spec, num_replicas: replicas.count });
      return;
    } catch (addErr) {
      // Another process created it between our info and add: fall through to the update check.
      info = await jsm.streams.info(name).catch(() => {
        throw addErr;
      });
    }
  }
  const changes = differing(wanted, info.config);
  if (Object.keys(changes).length > 0) await jsm.streams.update(name, changes);
  await ensureStreamReplicas(jsm, name, replicas, log);
}

/** A durable consumer: created, or its stated fields updated when they differ. */
export async function ensureConsumer(
  jsm: JetStreamManager,
  stream: string,
  config: Partial<ConsumerConfig> & { durable_name: string },
): Promise<void> {
  const { durable_name, ...wanted } = config;
  try {
    const info = await jsm.consumers.info(stream, durable_name);
    const changes = differing(wanted, info.config);
    if (Object.keys(changes).length > 0) await jsm.consumers.update(stream, durable_name, changes);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    try {
      await jsm.consumers.add(stream, config);
    } catch (addErr) {
      // Created meanwhile by another replica with the same config.
      await jsm.consumers.info(stream, durable_name).catch(() => {
        throw addErr;
      });
    }
  }
}

/** A KV bucket: created when missing (KV's own create is idempotent for an equal config), with `replicas`. */
export async function ensureBucket(
  jsm: JetStreamManager,
  spec: BucketSpec,
  replicas: Replicas = SINGLE_REPLICA,
  log?: Logger,
): Promise<KV> {
  const { name, ...opts } = spec;
  const kv = await new Kvm(jsm.jetstream()).create(name, { ...opts, replicas: replicas.count });
  await ensureStreamReplicas(jsm, `KV_${name}`, replicas, log);
  return kv;
}

/** Opens a bucket another process creates; undefined while it does not exist yet. */
export async function openBucket(jsm: JetStreamManager, name: string): Promise<KV | undefined> {
  try {
    await jsm.streams.info(`KV_${name}`);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
  return new Kvm(jsm.jetstream()).open(name);
}

/** How long deploy records and build logs are kept. */
export const BUILD_RETENTION_MS = 30 * 24 * 3_600_000;
/** Lines kept per build log (the oldest go first). */
export const BUILD_LOG_MAX_LINES = 20_000;
/** A re-published build job with the same `Nats-Msg-Id` (build id) within this window is dropped. */
export const BUILDS_DUPLICATE_WINDOW_MS = 10 * 60_000;

/** Accepted deploys (written by the management API, consumed by the build worker). */
export const buildsStream = (): StreamSpec => ({
  name: BUILDS_STREAM,
  subjects: ['apphost.builds.>'],
  retention: RetentionPolicy.Workqueue,
  storage: StorageType.File,
  duplicate_window: nanos(BUILDS_DUPLICATE_WINDOW_MS),
  max_msg_size: 64 * 1024,
});

/** Build logs, one subject per build (written by the build worker, read by the management API). */
export const buildLogsStream = (): StreamSpec => ({
  name: BUILD_LOGS_STREAM,
  subjects: ['apphost.buildlogs.>'],
  retention: RetentionPolicy.Limits,
  storage: StorageType.File,
  max_age: nanos(BUILD_RETENTION_MS),
  max_msgs_per_subject: BUILD_LOG_MAX_LINES,
  discard: DiscardPolicy.Old,
  max_msg_size: 16 * 1024,
});

/** Build records and each app's newest build (written by the management API and the build worker). */
export const buildsBucket = (): BucketSpec => ({
  name: BUILDS_BUCKET,
  history: 1,
  ttl: BUILD_RETENTION_MS,
  storage: StorageType.File,
});

/** Dependency key → the dependency set built for it (written by the builders). */
export const dependencySetsBucket = (): BucketSpec => ({
  name: DEPENDENCY_SETS_BUCKET,
  history: 1,
  storage: StorageType.File,
});

/** Object Store of bundles and dependency sets (stream `OBJ_apphost_artifacts`), one object per sha256. */
export const artifactsObjectStore = () => ({
  name: ARTIFACTS_BUCKET,
  storage: StorageType.File,
  description: 'apphost bundles and dependency sets, named by sha256',
});
