/**
 * Creates (idempotently) what async runs need in JetStream: the RUNS work-queue stream and the
 * run-record KV bucket. Safe to call from every gateway/worker replica at start-up.
 */
import { type JetStreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { KV, Kvm } from '@nats-io/kv';
import { RUNS_BUCKET, RUNS_STREAM } from '../shared/contracts/messaging.ts';
import { ensureStreamReplicas, type Replicas, SINGLE_REPLICA } from '../shared/jetstream-replicas.ts';

/** Window in which a re-published RunJob with the same `Nats-Msg-Id` (request id) is dropped. */
export const RUNS_DUPLICATE_WINDOW_MS = 5 * 60_000;
/** How long a run record is kept after its last change (KV max age). */
export const RUN_RECORD_RETENTION_MS = 7 * 24 * 3600_000;
/** Largest accepted run message (request body + headers, base64) the stream stores. */
export const RUNS_MAX_MSG_BYTES = 8 * 1024 * 1024;

const nanos = (ms: number) => ms * 1_000_000;

export async function ensureRunsStream(jsm: JetStreamManager, replicas = SINGLE_REPLICA): Promise<void> {
  const wanted = {
    num_replicas: replicas.count,
    subjects: ['apphost.runs.>'],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    duplicate_window: nanos(RUNS_DUPLICATE_WINDOW_MS),
    max_msg_size: RUNS_MAX_MSG_BYTES,
  };
  try {
    const info = await jsm.streams.info(RUNS_STREAM);
    if (
      info.config.duplicate_window !== wanted.duplicate_window ||
      info.config.max_msg_size !== wanted.max_msg_size
    ) {
      await jsm.streams.update(RUNS_STREAM, {
        duplicate_window: wanted.duplicate_window,
        max_msg_size: wanted.max_msg_size,
      });
    }
  } catch (err) {
    if (!isStreamNotFound(err)) throw err;
    try {
      await jsm.streams.add({ name: RUNS_STREAM, ...wanted });
    } catch (addErr) {
      // Another replica created it between our info and add.
      await jsm.streams.info(RUNS_STREAM).catch(() => {
        throw addErr;
      });
    }
  }
  await ensureStreamReplicas(jsm, RUNS_STREAM, replicas);
}

export async function ensureRunsBucket(
  kvm: Kvm,
  jsm: JetStreamManager,
  replicas = SINGLE_REPLICA,
): Promise<KV> {
  const kv = await kvm.create(RUNS_BUCKET, {
    history: 1,
    ttl: RUN_RECORD_RETENTION_MS,
    storage: StorageType.File,
    replicas: replicas.count,
  });
  await ensureStreamReplicas(jsm, `KV_${RUNS_BUCKET}`, replicas);
  return kv;
}

/**
 * The RUNS stream and the run-record bucket, with `replicas` (see jetstream-replicas.ts; one copy when
 * not given); returns the bucket.
 */
export async function ensureRunsInfrastructure(
  jsm: JetStreamManager,
  kvm: Kvm,
  replicas: Replicas = SINGLE_REPLICA,
): Promise<KV> {
  await ensureRunsStream(jsm, replicas);
  return ensureRunsBucket(kvm, jsm, replicas);
}

function isStreamNotFound(err: unknown): boolean {
  const e = err as { name?: string; message?: string; code?: unknown; api_error?: { err_code?: number } };
  return (
    e?.name === 'StreamNotFoundError' ||
    e?.api_error?.err_code === 10059 ||
    /stream not found/i.test(String(e?.message))
  );
}
