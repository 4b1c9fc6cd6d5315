/**
 * What webhook delivery ensures in JetStream (configs: src/shared/nats/jetstream.ts). Writers of jobs
 * (the gateway, the run worker) ensure the WEBHOOKS stream; the dispatcher ensures the stream under
 * its durable consumer, the consumer, and the delivery-record bucket it writes.
 */
import { AckPolicy, DeliverPolicy, type JetStreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { WEBHOOK_DELIVERIES_BUCKET, WEBHOOKS_STREAM } from '../shared/contracts/messaging.ts';
import {
  deliveriesBucket,
  ensureBucket,
  ensureConsumer,
  ensureStream,
  nanos,
  openBucket,
  WEBHOOKS_SUBJECTS,
  webhooksStream,
} from '../shared/nats/jetstream.ts';
import { type Replicas, SINGLE_REPLICA } from '../shared/nats/replicas.ts';

export { WEBHOOKS_SUBJECTS };
/** The durable pull consumer shared by all dispatcher replicas. */
export const WEBHOOKS_CONSUMER = 'webhook-dispatcher';
/**
 * Redelivery bound when a dispatcher dies mid-attempt. Kept at the spec's 5 s gap; a live dispatcher
 * extends it with `working()` heartbeats while an attempt is in flight.
 */
export const WEBHOOKS_ACK_WAIT_MS = 5_000;
/** At most this many unacknowledged deliveries across all replicas. */
export const WEBHOOKS_MAX_ACK_PENDING = 1_000;

/** The WEBHOOKS stream (for the processes that publish jobs). */
export async function ensureWebhooksStream(jsm: JetStreamManager, replicas = SINGLE_REPLICA): Promise<void> {
  await ensureStream(jsm, webhooksStream(), replicas);
}

/** The WEBHOOKS stream and the dispatchers' durable consumer on it. */
export async function ensureWebhooksConsumer(
  jsm: JetStreamManager,
  replicas: Replicas = SINGLE_REPLICA,
): Promise<void> {
  await ensureWebhooksStream(jsm, replicas);
  await ensureConsumer(jsm, WEBHOOKS_STREAM, {
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
}

/** Opens (creating if needed) the delivery-record bucket: for the dispatcher, which writes it. */
export async function openDeliveriesBucket(jsm: JetStreamManager, replicas = SINGLE_REPLICA): Promise<KV> {
  return ensureBucket(jsm, deliveriesBucket(), replicas);
}

/** The delivery-record bucket for a reader: undefined until a dispatcher has created it. */
export async function findDeliveriesBucket(jsm: JetStreamManager): Promise<KV | undefined> {
  return openBucket(jsm, WEBHOOK_DELIVERIES_BUCKET);
}
