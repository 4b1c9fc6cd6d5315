/** The gateway's bounds and limits. main.ts reads them from the environment (see docs/gateway.md). */
export interface GatewaySettings {
  /** Largest request body accepted (413 above it). */
  maxBodyBytes: number;
  /** Bound on a sync call: time until the app's response head arrives (504 after it). */
  syncTimeoutMs: number;
  /** Bound on silence between chunks of a response body or SSE stream (0 = none). */
  streamIdleTimeoutMs: number;
  /** Bound on waiting for JetStream to acknowledge an async run (503 after it). */
  publishTimeoutMs: number;
  /** `Retry-After` seconds sent with 503 app_not_ready / shutting_down. */
  retryAfterSeconds: number;
  /** Largest function response forwarded to a webhook (a bigger one is not forwarded; logged). */
  maxWebhookBodyBytes: number;
  /** Bound on draining: in-flight sync calls and streams get this long to finish on shutdown. */
  drainTimeoutMs: number;
  /** Bound on one publish of a sync call's webhook job (a failed one is held and retried). */
  webhookPublishTimeoutMs: number;
  /** Webhook jobs of sync calls held in memory while JetStream does not take them (beyond: dropped, logged). */
  webhookOutboxMaxJobs: number;
  /** Bytes of such held jobs. */
  webhookOutboxMaxBytes: number;
  /** On shutdown, how long held webhook jobs may still be retried before they are given up (logged). */
  webhookOutboxCloseMs: number;
  /** Sync calls recorded per app and second, fire and forget (0 = none): runs/sync-calls.ts. */
  syncRecordsPerAppPerSecond: number;
  /** Sync calls recorded per second for all apps of this process together. */
  syncRecordsPerSecond: number;
}

export const DEFAULT_GATEWAY_SETTINGS: GatewaySettings = {
  maxBodyBytes: 10 * 1024 * 1024,
  syncTimeoutMs: 300_000,
  streamIdleTimeoutMs: 300_000,
  publishTimeoutMs: 5_000,
  retryAfterSeconds: 5,
  maxWebhookBodyBytes: 768 * 1024,
  drainTimeoutMs: 30_000,
  webhookPublishTimeoutMs: 5_000,
  webhookOutboxMaxJobs: 10_000,
  webhookOutboxMaxBytes: 64 * 1024 * 1024,
  webhookOutboxCloseMs: 10_000,
  syncRecordsPerAppPerSecond: 10,
  syncRecordsPerSecond: 200,
};
