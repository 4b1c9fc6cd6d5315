/**
 * Delivery records (`WebhookDeliveryRecord`) in the `WEBHOOK_DELIVERIES_BUCKET` KV, keyed by request
 * id: written by the dispatcher after every attempt, read by the management API for run records.
 */
import type { KV } from '@nats-io/kv';
import type { WebhookDeliveryRecord } from '../shared/contracts/messaging.ts';

export interface DeliveryStore {
  get(requestId: string): Promise<WebhookDeliveryRecord | undefined>;
  put(record: WebhookDeliveryRecord): Promise<void>;
}

/** KV keys allow a restricted alphabet; any other request id is stored under its base64url form. */
export function deliveryKey(requestId: string): string {
  return /^[-_A-Za-z0-9]{1,200}$/.test(requestId)
    ? requestId
    : `b64_${Buffer.from(requestId, 'utf8').toString('base64url')}`;
}

export function createDeliveryStore(kv: KV): DeliveryStore {
  return {
    async get(requestId) {
      const entry = await kv.get(deliveryKey(requestId));
      if (entry?.operation !== 'PUT' || entry.length === 0) return undefined;
      return entry.json<WebhookDeliveryRecord>();
    },
    async put(record) {
      await kv.put(deliveryKey(record.requestId), JSON.stringify(record));
    },
  };
}
