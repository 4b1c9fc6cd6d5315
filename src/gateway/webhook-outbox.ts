/**
 * The webhook jobs of sync calls on their way to JetStream. A sync call's caller already has its answer
 * when the job is built, so a publish that fails (NATS down, a cluster electing a stream leader) must not
 * drop the job: it waits here, in memory, and is published again until JetStream takes it. Re-publishing
 * is safe: the job's `Nats-Msg-Id` (`webhook-<request id>`) makes JetStream store it once.
 *
 * Bounded by `maxJobs` and `maxBytes`: a job that does not fit is dropped with an error log and the
 * `dropped` outcome. What is held here is lost if the process dies before NATS is back (docs/reliability.md).
 */
import type { Clock } from '../shared/clock.ts';
import type { WebhookJob } from '../shared/contracts/messaging.ts';
import type { Logger } from '../shared/log.ts';

export interface WebhookOutboxSettings {
  /** Jobs held at most while JetStream does not take them. */
  maxJobs: number;
  /** Bytes (serialized jobs) held at most. */
  maxBytes: number;
  /** First pause between publish retries of the held jobs; doubles up to `maxRetryDelayMs`. */
  retryDelayMs: number;
  maxRetryDelayMs: number;
}

export const DEFAULT_WEBHOOK_OUTBOX_SETTINGS: WebhookOutboxSettings = {
  maxJobs: 10_000,
  maxBytes: 64 * 1024 * 1024,
  retryDelayMs: 500,
  maxRetryDelayMs: 5_000,
};

export type OutboxOutcome = 'queued' | 'held' | 'queued_after_retry' | 'dropped';

export interface WebhookOutbox {
  /**
   * Publishes `job`. Resolves (never rejects) once JetStream stored it, or it is held for retries, or
   * dropped; while jobs are held (an outage is on) a new one joins them at once without waiting.
   */
  add(job: WebhookJob, log: Logger): Promise<void>;
  /** Jobs waiting for JetStream (held, plus first publishes still in flight). */
  pending(): number;
  /**
   * Keeps publishing until nothing is pending or `boundMs` passes; then stops retrying and logs
   * (with their request ids) the jobs it could not hand over.
   */
  close(boundMs: number): Promise<void>;
}

export function createWebhookOutbox(deps: {
  publish(job: WebhookJob): Promise<void>;
  settings: WebhookOutboxSettings;
  clock: Clock;
  log: Logger;
  /** Called once per job outcome (metrics). */
  count(outcome: OutboxOutcome): void;
  /** Called when the number of held jobs changes (metrics). */
  held?(jobs: number): void;
}): WebhookOutbox {
  const { settings, clock, log } = deps;
  const held: Array<{ job: WebhookJob; bytes: number }> = [];
  let heldBytes = 0;
  let inFlight = 0;
  let retrying: Promise<void> | undefined;
  let closed = false;
  let stop = new AbortController();
  let settled: (() => void) | undefined;

  const sizeOf = (job: WebhookJob) => job.response.bodyBase64.length + 1024;
  const changed = () => {
    deps.held?.(held.length);
    if (held.length === 0 && inFlight === 0) settled?.();
  };

  function hold(job: WebhookJob, reqLog: Logger, err: unknown): void {
    const bytes = sizeOf(job);
    if (closed || held.length >= settings.maxJobs || heldBytes + bytes > settings.maxBytes) {
      deps.count('dropped');
      reqLog.error(
        { err, heldJobs: held.length, heldBytes, closed },
        'webhook job dropped: JetStream did not take it and the outbox is full or closed',
      );
      return;
    }
    held.push({ job, bytes });
    heldBytes += bytes;
    deps.count('held');
    reqLog.warn({ err, heldJobs: held.length }, 'webhook job held until JetStream takes it');
    retrying ??= retryLoop().finally(() => {
      retrying = undefined;
    });
  }

  async function retryLoop(): Promise<void> {
    let delay = settings.retryDelayMs;
    while (held.length > 0 && !stop.signal.aborted) {
      const head = held[0] as { job: WebhookJob; bytes: number };
      try {
        await deps.publish(head.job);
        held.shift();
        heldBytes -= head.bytes;
        deps.count('queued_after_retry');
        log.info({ requestId: head.job.requestId, heldJobs: held.length }, 'held webhook job queued');
        delay = settings.retryDelayMs;
        changed();
      } catch (err) {
        log.debug({ err, heldJobs: held.length, delayMs: delay }, 'outbox publish failed; retrying');
        await clock.sleep(delay, stop.signal).catch(() => undefined);
        delay = Math.min(delay * 2, settings.maxRetryDelayMs);
      }
    }
  }

  return {
    add(job, reqLog) {
      if (held.length > 0) {
        hold(job, reqLog, new Error('earlier webhook jobs are still waiting for JetStream'));
        return Promise.resolve();
      }
      inFlight++;
      return deps.publish(job).then(
        () => {
          inFlight--;
          deps.count('queued');
          changed();
        },
        (err: unknown) => {
          inFlight--;
          hold(job, reqLog, err);
          changed();
        },
      );
    },
    pending: () => held.length + inFlight,
    async close(boundMs) {
      if (held.length > 0 || inFlight > 0) {
        // A pause between retries must not outlast the bound: wake the loop now, retry at once.
        stop.abort();
        stop = new AbortController();
        retrying ??= retryLoop().finally(() => {
          retrying = undefined;
        });
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          new Promise<void>((r) => {
            settled = r;
          }),
          new Promise<void>((r) => {
            timer = setTimeout(r, boundMs);
          }),
        ]);
        clearTimeout(timer);
      }
      closed = true;
      stop.abort();
      await retrying;
      if (held.length > 0)
        log.error(
          { lost: held.length, requestIds: held.map((h) => h.job.requestId) },
          'shutting down with webhook jobs JetStream never took: they are lost',
        );
    },
  };
}
