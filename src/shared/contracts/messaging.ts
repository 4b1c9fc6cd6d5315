/**
 * What crosses NATS between the gateway, the run worker, the webhook dispatcher and the management
 * API. Changing a shape here is changing a wire format: bump `v` and keep reading the old one.
 */
export const RUNS_STREAM = 'RUNS';
export const WEBHOOKS_STREAM = 'WEBHOOKS';
/** KV bucket of run records, keyed by `runKey()`. */
export const RUNS_BUCKET = 'apphost_runs';
/** KV bucket of webhook delivery records, keyed by request id. */
export const WEBHOOK_DELIVERIES_BUCKET = 'apphost_webhook_deliveries';

export const runSubject = (projectId: string, appName: string) => `apphost.runs.${projectId}.${appName}`;
export const webhookSubject = (projectId: string, appName: string) =>
  `apphost.webhooks.${projectId}.${appName}`;
/** Stream of recorded sync calls (run records with `mode: 'sync'`), the newest few per app. */
export const SYNC_CALLS_STREAM = 'SYNC_CALLS';
export const syncCallSubject = (projectId: string, appName: string) =>
  `apphost.calls.${projectId}.${appName}`;
/** Core NATS subject on which a cancel request for a running run is announced. */
export const runCancelSubject = (runId: string) => `apphost.cancel.${runId}`;
export const runKey = (projectId: string, appName: string, runId: string) =>
  `${projectId}.${appName}.${runId}`;
/** Key of a run's kept response bytes, in the same bucket (so the same retention); one token deeper than runKey. */
export const runResultKey = (projectId: string, appName: string, runId: string) =>
  `${runKey(projectId, appName, runId)}.result`;
/** Key of a finished run's whole webhook body when its result does not hold all of it (same bucket). */
export const runWebhookBodyKey = (projectId: string, appName: string, runId: string) =>
  `${runKey(projectId, appName, runId)}.webhook`;

/** An accepted async run, published to RUNS with `Nats-Msg-Id` = requestId. */
export interface RunJob {
  v: 1;
  requestId: string;
  projectId: string;
  appName: string;
  /** The path after `/v4/<project>/<app>/` (for cortex, the function name). */
  path: string;
  /** Raw query string without our own `async` and `webhookEndpoint` parameters ('' when none). */
  query: string;
  /** Headers forwarded to the app (never Authorization or X-Webhook-Secret). */
  headers: Record<string, string>;
  bodyBase64: string;
  webhook?: WebhookTarget;
  acceptedAt: string;
  /** The app's response_grace_period when accepted: bounds the run. */
  gracePeriodSeconds: number;
}

export interface WebhookTarget {
  endpoint: string;
  /** X-Webhook-Secret sealed with the platform key (secretbox); absent when unsigned. */
  sealedSecret?: string;
}

export const RunState = {
  Queued: 'queued',
  Running: 'running',
  Success: 'success',
  Failure: 'failure',
  Timeout: 'timeout',
  Cancelled: 'cancelled',
} as const;
export type RunState = (typeof RunState)[keyof typeof RunState];
export const TERMINAL_RUN_STATES: readonly RunState[] = ['success', 'failure', 'timeout', 'cancelled'];

export interface RunRecord {
  /** How the call was made: absent or `async` for a queued run, `sync` for a recorded sync call. */
  mode?: 'sync' | 'async';
  runId: string;
  projectId: string;
  appName: string;
  path: string;
  state: RunState;
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  /** How many times a worker started executing this run (>1 after a redelivery). */
  executions: number;
  /**
   * Internal (not shown by the API): the execution that last set `running`, so a worker retrying that
   * write after a lost answer recognises its own and does not count the execution twice.
   */
  executionId?: string;
  responseStatus?: number;
  error?: { code: string; message: string };
  cancelRequested?: boolean;
  /** Host of the webhook endpoint, when the run forwards its result (never the full URL's secrets). */
  webhookHost?: string;
  /**
   * The function's response, as far as it is kept; the bytes are in `result.inlineBase64` when small,
   * else under `runResultKey()`.
   */
  result?: RunResult;
  /** The app answered `text/event-stream`: the result holds the events as they were sent. */
  streamed?: boolean;
}

/**
 * What the run record keeps of the function's response (bounded by the worker's `maxResultBytes`):
 * `complete` all of it; `truncated` the first `keptBytes` (text only, cut at a character boundary);
 * `dropped` none (a non-text response over the bound, or bytes the store could not take: `reason`).
 */
export interface RunResult {
  kept: 'complete' | 'truncated' | 'dropped';
  contentType?: string;
  /** Size of the whole response body. */
  sizeBytes: number;
  keptBytes: number;
  reason?: string;
  /**
   * The kept bytes themselves, base64, when there are at most `RUN_RESULT_INLINE_MAX_BYTES` (runs/outcome.ts):
   * written with the final record in one write. Absent: the bytes are under `runResultKey()` (or none kept).
   */
  inlineBase64?: string;
}

/** A delivery to perform, published to WEBHOOKS with `Nats-Msg-Id` = `webhook-<requestId>`. */
export interface WebhookJob {
  v: 1;
  requestId: string;
  projectId: string;
  appName: string;
  target: WebhookTarget;
  /** The function's response as the app sent it. */
  response: { status: number; contentType?: string; bodyBase64: string };
  runStatus: 'success' | 'failure' | 'timeout';
  completedAt: string;
}

export type WebhookAttemptOutcome =
  | 'success'
  | 'http_retryable'
  | 'http_permanent'
  | 'network_error'
  | 'timeout'
  | 'refused_by_policy';

export interface WebhookAttempt {
  attempt: number;
  at: string;
  outcome: WebhookAttemptOutcome;
  status?: number;
  error?: string;
  durationMs: number;
}

export interface WebhookDeliveryRecord {
  requestId: string;
  projectId: string;
  appName: string;
  endpointHost: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: WebhookAttempt[];
  updatedAt: string;
}
