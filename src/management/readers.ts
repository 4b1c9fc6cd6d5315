/**
 * What the management API needs from the run worker's store and the webhook dispatcher's delivery
 * store: narrow on purpose, so src/runs/store.ts and src/webhooks/deliveries.ts satisfy them as is.
 */
import type { RunRecord, RunState, WebhookDeliveryRecord } from '../shared/contracts/messaging.ts';

export interface RunReader {
  get(projectId: string, appName: string, runId: string): Promise<RunRecord | undefined>;
  /** A run of the project, whatever its app. */
  find(projectId: string, runId: string): Promise<RunRecord | undefined>;
  /**
   * Newest first; every app of the project when `appName` is undefined. `mode`: only async runs or
   * only recorded sync calls (a reader without sync calls has async runs only).
   */
  list(
    projectId: string,
    appName: string | undefined,
    opts: { state?: RunState; limit?: number; mode?: 'sync' | 'async' },
  ): Promise<RunRecord[]>;
  /** The kept bytes of a run's result. */
  getResult(projectId: string, appName: string, runId: string): Promise<Uint8Array | undefined>;
  /** Marks the run for cancellation (the worker stops it); undefined when there is no such run. */
  requestCancel(projectId: string, appName: string, runId: string): Promise<RunRecord | undefined>;
}

export interface DeliveryReader {
  get(requestId: string): Promise<WebhookDeliveryRecord | undefined>;
}
