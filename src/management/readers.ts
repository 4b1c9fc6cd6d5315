/**
 * What the management API needs from the run worker's store and the webhook dispatcher's delivery
 * store: narrow on purpose, so src/runs/store.ts and src/webhooks/deliveries.ts satisfy them as is.
 */
import type { RunRecord, RunState, WebhookDeliveryRecord } from '../shared/contracts/messaging.ts';

export interface RunReader {
  get(projectId: string, appName: string, runId: string): Promise<RunRecord | undefined>;
  /** Newest first. */
  list(projectId: string, appName: string, opts: { state?: RunState; limit?: number }): Promise<RunRecord[]>;
  /** Marks the run for cancellation (the worker stops it); undefined when there is no such run. */
  requestCancel(projectId: string, appName: string, runId: string): Promise<RunRecord | undefined>;
}

export interface DeliveryReader {
  get(requestId: string): Promise<WebhookDeliveryRecord | undefined>;
}
