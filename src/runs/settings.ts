/** The run worker's bounds. main.ts reads them from the environment (see docs/runs.md). */
export interface RunWorkerSettings {
  /** Durable consumer name on RUNS; all replicas share it, so each run goes to one worker. */
  consumerName: string;
  /** Runs executed at the same time by one worker process. */
  concurrency: number;
  /** JetStream ack_wait: a run whose worker stops heartbeating for this long is redelivered. */
  ackWaitMs: number;
  /** Started executions of one run (first plus re-executions after crashes) before it is marked `failure`. */
  maxExecutions: number;
  /** How long one pull request waits for a run before asking again. */
  pullExpiresMs: number;
  /** Bound on one attempt to enqueue the webhook job of a finished run. */
  webhookPublishTimeoutMs: number;
  /**
   * How long a write of a run (its record when it starts and ends, its result, its webhook job) is retried
   * while JetStream does not take it (a node lost, a leader being elected); the run is held (heartbeats)
   * meanwhile. After it the run is handed back for redelivery.
   */
  writeTimeoutMs: number;
  /** Largest response body kept for the webhook (larger responses are not forwarded; logged). */
  maxWebhookBodyBytes: number;
  /** Largest part of a response the run record keeps as the run's result (over it: truncated or dropped, marked). */
  maxResultBytes: number;
  /** Pause after a failed pull (e.g. NATS unreachable) before pulling again. */
  pullErrorBackoffMs: number;
  /** A run that found no replica slot in time goes back to JetStream for this long (it stays queued). */
  capacityRetryMs: number;
  /** A run still without a replica slot this long after it was accepted fails (`queue_timeout`). */
  maxQueuedMs: number;
}

export const DEFAULT_RUN_WORKER_SETTINGS: RunWorkerSettings = {
  consumerName: 'run-worker',
  concurrency: 16,
  ackWaitMs: 30_000,
  maxExecutions: 3,
  pullExpiresMs: 5_000,
  webhookPublishTimeoutMs: 5_000,
  writeTimeoutMs: 60_000,
  maxWebhookBodyBytes: 768 * 1024,
  maxResultBytes: 256 * 1024,
  pullErrorBackoffMs: 1_000,
  capacityRetryMs: 5_000,
  maxQueuedMs: 3_600_000,
};
