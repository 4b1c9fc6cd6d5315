/**
 * Delivery records (`WebhookDeliveryRecord`) in the `WEBHOOK_DELIVERIES_BUCKET` KV, keyed by request
 * id: written by the dispatcher before and after every attempt, read by the management API for run
 * records. Writes are compare-and-set on the KV revision, so two dispatchers that both believe they own
 * a job (a stalled one and the one it was redelivered to) cannot overwrite each other's attempts.
 */
import type { KV } from '@nats-io/kv';
import type { WebhookDeliveryRecord } from '../shared/contracts/messaging.ts';

export interface DeliveryStore {
  get(requestId: string): Promise<WebhookDeliveryRecord | undefined>;
  /** The record and its revision, for a following `save`. */
  load(requestId: string): Promise<{ record: WebhookDeliveryRecord; revision: number } | undefined>;
  /**
   * Writes the record if the stored revision is still `revision` (0: only if there is none yet) and
   * returns the new revision; throws `DeliveryConflictError` when someone else wrote in between.
   */
  save(record: WebhookDeliveryRecord, revision: number): Promise<number>;
}

export class DeliveryConflictError extends Error {
  constructor(requestId: string, opts?: ErrorOptions) {
    super(`delivery record ${requestId} was changed by another dispatcher`, opts);
    this.name = 'DeliveryConflictError';
  }
}

/** KV keys allow a restricted alphabet; any other request id is stored under its base64url form. */
export function deliveryKey(requestId: string): string {
  return /^[-_A-Za-z0-9]{1,200}$/.test(requestId)
    ? requestId
    : `b64_${Buffer.from(requestId, 'utf8').toString('base64url')}`;
}

export function createDeliveryStore(kv: KV): DeliveryStore {
  const load: DeliveryStore['load'] = async (requestId) => {
    const entry = await kv.get(deliveryKey(requestId));
    if (entry?.operation !== 'PUT' || entry.length === 0) return undefined;
    return { record: entry.json<WebhookDeliveryRecord>(), revision: entry.revision };
  };
  return {
    load,
    get: async (requestId) => (await load(requestId))?.record,
    async save(record, revision) {
      const key = deliveryKey(record.requestId);
      const data = JSON.stringify(record);
      try {
        return revision === 0 ? await kv.create(key, data) : await kv.update(key, data, revision);
      } catch (err) {
        if (err instanceof Error && /wrong last sequence|key exists/i.test(err.message))
          throw new DeliveryConflictError(record.requestId, { cause: err });
        throw err;
      }
    },
  };
}

/**
 * A reader for a process that does not create the bucket (the management API): opens it on first use,
 * and answers "no record" while no dispatcher has created it yet.
 */
export function lazyDeliveryReader(find: () => Promise<KV | undefined>): Pick<DeliveryStore, 'get'> {
  let store: DeliveryStore | undefined;
  return {
    async get(requestId) {
      if (!store) {
        const kv = await find();
        if (!kv) return undefined;
        store = createDeliveryStore(kv);
      }
      return store.get(requestId);
    },
  };
}
