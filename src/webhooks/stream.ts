/**
 * The JetStream objects webhook delivery lives on: the WEBHOOKS work-queue stream, the durable consumer
 * every dispatcher replica shares, and the delivery-record KV bucket. Safe to call from every piece
 * at start-up (gateway, run worker, dispatcher): creating what already exists is a no-op.
 */
import {
  AckPolicy,
  DeliverPolicy,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import { WEBHOOK_DELIVERIES_BUCKET, WEBHOOKS_STREAM } from '../shared/contracts/messaging.ts';
import { ensureStreamReplicas, type Replicas, SINGLE_REPLICA } from '../shared/jetstream-replicas.ts';

export const WEBHOOKS_SUBJECTS = 'apphost.webhooks.>';
/** The durable pull consumer shared by all dispatcher replicas. */
export const WEBHOOKS_CONSUMER = 'webhook-dispatcher';
/** A retried publish of the same job within this window is stored once (spec: ≥ 2 min). */
export const WEBHOOKS_DUPLICATE_WINDOW_MS = 10 * 60_000;
/**
 * Redelivery bound when a dispatcher dies mid-attempt. Kept at the spec's 5 s gap; a live dispatcher
 * extends it with `working()` heartbeats while an attempt is in flight.
 */
export const WEBHOOKS_ACK_WAIT_MS = 5_000;
/** At most this many unacknowledged deliveries across all replicas. */
export const WEBHOOKS_MAX_ACK_PENDING = 1_000;
/** How long a delivery record is kept for the management API. */
export const WEBHOOK_DELIVERIES_TTL_MS = 7 * 24 * 3_600_000;

const nanos = (ms: number) => ms * 1_000_000;

function alreadyExists(err: unknown): boolean {
  return err instanceof Error && /already in use|already exists/i.test(err.message);
}

/**
 * Creates the WEBHOOKS stream, its durable consumer and the deliveries bucket if they are missing, and
 * brings the stream and bucket to `replicas` (the consumer follows its stream's).
 */
export async function ensureWebhooksStream(
  jsm: JetStreamManager,
  replicas: Replicas = SINGLE_REPLICA,
): Promise<void> {
  try {
    await jsm.streams.add({
      name: WEBHOOKS_STREAM,
      num_replicas: replicas.count,
      subjects: [WEBHOOKS_SUBJECTS],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      duplicate_window: nanos(WEBHOOKS_DUPLICATE_WINDOW_MS),
    });
  } catch (err) {
    // Exists with a different configuration (an operator tuned it): keep theirs.
    if (!alreadyExists(err)) throw err;
  }
  try {
    await jsm.consumers.add(WEBHOOKS_STREAM, {
      durable_name: WEBHOOKS_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      filter_subject: WEBHOOKS_SUBJECTS,
      ack_wait: nanos(WEBHOOKS_ACK_WAIT_MS),
      // Unlimited: the attempt count lives in the delivery record, so a redelivery that never reached
      // the receiver (a dispatcher stopping) does not use up one of the three attempts.
      max_deliver: -1,
      max_ack_pending: WEBHOOKS_MAX_ACK_PENDING,
    });
  } catch (err) {
    if (!alreadyExists(err)) throw err;
  }
  await ensureStreamReplicas(jsm, WEBHOOKS_STREAM, replicas);
  await openDeliveriesBucket(jsm, replicas);
}

/** Opens (creating if needed, with `replicas`) the `WEBHOOK_DELIVERIES_BUCKET` KV. */
export async function openDeliveriesBucket(
  jsm: JetStreamManager,
  replicas: Replicas = SINGLE_REPLICA,
): Promise<KV> {
  const kv = await new Kvm(jsm.jetstream()).create(WEBHOOK_DELIVERIES_BUCKET, {
    history: 1,
    ttl: WEBHOOK_DELIVERIES_TTL_MS,
    storage: StorageType.File,
    replicas: replicas.count,
  });
  await ensureStreamReplicas(jsm, `KV_${WEBHOOK_DELIVERIES_BUCKET}`, replicas);
  return kv;
}
