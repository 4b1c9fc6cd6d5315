/**
 * One JetStream delivery of a webhook job → at most one attempt, and the decision what JetStream does
 * with the job next (ack, nak with a delay, term). The delivery record is the source of truth for the
 * attempt count: it is written before each attempt starts, so an attempt cut short by a crash counts.
 */

import type { Clock } from '../shared/clock.ts';
import type { WebhookAttempt, WebhookDeliveryRecord, WebhookJob } from '../shared/contracts/messaging.ts';
import { type Logger, lazyChild } from '../shared/log.ts';
import type { SecretBox } from '../shared/secretbox.ts';
import { DeliveryConflictError, type DeliveryStore } from './deliveries.ts';
import type { AttemptResult, DeliveryTransport } from './http-transport.ts';
import type { WebhookMetrics } from './metrics.ts';
import { MAX_ATTEMPTS, nextStep } from './retry-policy.ts';
import { buildDeliveryRequest } from './signing.ts';
import { errorText } from './ssrf.ts';
import { WEBHOOKS_ACK_WAIT_MS } from './stream.ts';

/** What a started attempt says until its real outcome replaces it; it stays if the dispatcher died. */
export const INTERRUPTED_ATTEMPT = 'interrupted: the dispatcher stopped before this attempt finished';
/** How often an in-flight attempt tells JetStream it is still being worked on. */
export const HEARTBEAT_MS = Math.floor(WEBHOOKS_ACK_WAIT_MS / 3);

/** The part of a JetStream message the handler uses (`JsMsg` has it). */
export interface JobMessage {
  readonly data: Uint8Array;
  readonly seq: number;
  readonly subject: string;
  /** `timestampNanos`: when JetStream stored the job (it was queued). */
  readonly info: { readonly deliveryCount: number; readonly timestampNanos: number };
  ack(): void;
  nak(millis?: number): void;
  term(reason?: string): void;
  working(): void;
}

export interface JobHandlerDeps {
  store: DeliveryStore;
  transport: DeliveryTransport;
  secretBox: SecretBox;
  log: Logger;
  metrics: WebhookMetrics;
  clock: Clock;
  retryDelayMs: number;
  /**
   * nak delay when the record cannot be read or written, doubling with each delivery of the job up to
   * `errorBackoffMaxMs`: NATS trouble (a bucket's leader being elected) neither uses up an attempt nor
   * gives the job up, and a long outage is not hammered.
   */
  errorBackoffMs: number;
  errorBackoffMaxMs: number;
  /** A job whose record still cannot be read or written this long after it was queued is given up. */
  recordGiveUpMs: number;
  heartbeatMs?: number;
  /**
   * Acknowledges a delivered job once its record is stored; the dispatcher sends it with the other NATS
   * writes of its turn. Default: `msg.ack()` at once.
   */
  ack?: (msg: JobMessage) => void;
}

/** Endpoint URLs the handler keeps parsed at most. */
const URLS_KEPT = 1_024;

/** The pause before the `deliveries`-th delivery of a job is handed out again after a record error. */
export function storeRetryDelayMs(deliveries: number, firstMs: number, maxMs: number): number {
  return Math.min(maxMs, firstMs * 2 ** Math.min(Math.max(deliveries - 1, 0), 30));
}

export function parseWebhookJob(data: Uint8Array): WebhookJob {
  const job = JSON.parse(
    Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8'),
  ) as Partial<WebhookJob>;
  if (
    job?.v !== 1 ||
    typeof job.requestId !== 'string' ||
    typeof job.target?.endpoint !== 'string' ||
    typeof job.response?.bodyBase64 !== 'string' ||
    typeof job.response.status !== 'number'
  )
    throw new Error('not a v1 WebhookJob');
  return job as WebhookJob;
}

export function createJobHandler(deps: JobHandlerDeps): (msg: JobMessage) => Promise<void> {
  const { store, transport, secretBox, metrics, clock, retryDelayMs } = deps;
  const rootLog = deps.log;
  const heartbeatMs = deps.heartbeatMs ?? HEARTBEAT_MS;
  const ack = deps.ack ?? ((msg: JobMessage) => msg.ack());
  // Jobs handled together read the same millisecond: its text is formatted once.
  let isoMs = Number.NaN;
  let isoText = '';
  const iso = (ms: number) => {
    if (ms !== isoMs) {
      isoMs = ms;
      isoText = new Date(ms).toISOString();
    }
    return isoText;
  };

  // One heartbeat timer for all attempts in flight (not one per attempt): each attempt tells JetStream
  // it is still being worked on at most heartbeatMs after it starts and every heartbeatMs after that.
  const attempting = new Set<JobMessage>();
  let heartbeat: NodeJS.Timeout | undefined;
  const beat = () => {
    for (const m of attempting) {
      try {
        m.working();
      } catch {
        // connection gone: nothing to extend
      }
    }
  };

  // Parsed once per endpoint (jobs to one receiver repeat it); forgotten all at once past URLS_KEPT.
  const urls = new Map<string, URL | undefined>();
  const endpointUrl = (endpoint: string): URL | undefined => {
    if (urls.has(endpoint)) return urls.get(endpoint);
    if (urls.size >= URLS_KEPT) urls.clear();
    let url: URL | undefined;
    try {
      url = new URL(endpoint);
    } catch {
      url = undefined;
    }
    urls.set(endpoint, url);
    return url;
  };

  async function finish(
    msg: JobMessage,
    job: WebhookJob,
    record: WebhookDeliveryRecord,
    revision: number,
    result: 'delivered' | 'failed',
    log: Logger,
    why?: string,
  ): Promise<void> {
    record.state = result;
    record.updatedAt = iso(clock.now());
    await store.save(record, revision);
    const seconds = (clock.now() - Date.parse(job.completedAt)) / 1000;
    metrics.delivery(result, Number.isFinite(seconds) ? seconds : 0);
    const attempts = () =>
      record.attempts.map((a) => ({
        attempt: a.attempt,
        outcome: a.outcome,
        status: a.status,
        error: a.error,
      }));
    if (result === 'delivered') {
      if (rootLog.isLevelEnabled('info')) log.info({ attempts: attempts() }, 'webhook delivered');
      ack(msg);
    } else {
      log.error({ attempts: attempts(), reason: why }, 'webhook delivery failed; giving up');
      msg.term(why);
    }
  }

  async function handle(msg: JobMessage): Promise<void> {
    let job: WebhookJob;
    try {
      job = parseWebhookJob(msg.data);
    } catch (err) {
      rootLog.error(
        { seq: msg.seq, subject: msg.subject, err: errorText(err) },
        'malformed webhook job dropped',
      );
      msg.term('malformed job');
      return;
    }
    const url = endpointUrl(job.target.endpoint);
    const endpointHost = url?.hostname ?? '(invalid)';
    // Made on first use: most deliveries log nothing below the info level.
    const log = lazyChild(rootLog, { requestId: job.requestId, endpointHost });
    const s = store;
    try {
      // A first delivery almost never has a record yet: the record is created with the attempt in it
      // (compare-and-set on "no record"), one round trip instead of a read and a write. When one exists
      // after all (a job queued again for a finished run), it is read and decided on as for a redelivery.
      let loaded = msg.info.deliveryCount === 1 ? undefined : await s.load(job.requestId);
      let optimistic = loaded === undefined;
      let record: WebhookDeliveryRecord;
      let revision: number;
      let attempt: WebhookAttempt;
      let attemptNo: number;
      let startedAt: number;
      for (;;) {
        revision = loaded?.revision ?? 0;
        record = loaded?.record ?? {
          requestId: job.requestId,
          projectId: job.projectId,
          appName: job.appName,
          endpointHost,
          state: 'pending',
          attempts: [],
          updatedAt: iso(clock.now()),
        };
        if (record.state !== 'pending') {
          // Finished before, and the ack was lost: nothing left to do.
          msg.ack();
          return;
        }
        if (record.attempts.length >= MAX_ATTEMPTS) {
          await finish(msg, job, record, revision, 'failed', log, 'attempts_exhausted');
          return;
        }
        attemptNo = record.attempts.length + 1;
        startedAt = clock.now();
        attempt = {
          attempt: attemptNo,
          at: iso(startedAt),
          outcome: 'network_error',
          error: INTERRUPTED_ATTEMPT,
          durationMs: 0,
        };
        record.attempts.push(attempt);
        record.updatedAt = iso(startedAt);
        // Written before the attempt starts, so an attempt cut short by a crash still counts.
        try {
          revision = await s.save(record, revision);
          break;
        } catch (err) {
          if (!(optimistic && err instanceof DeliveryConflictError)) throw err;
          optimistic = false;
          loaded = await s.load(job.requestId);
        }
      }

      const result = await attemptOnce(msg, job, url);
      attempt.durationMs = clock.now() - startedAt;
      attempt.outcome = result.outcome;
      if (result.status !== undefined) attempt.status = result.status;
      if (result.error !== undefined) attempt.error = result.error;
      else delete attempt.error;
      metrics.attempt(result.outcome, attempt.durationMs / 1000);

      const step = nextStep(result.outcome, attemptNo, { retryDelayMs: retryDelayMs });
      if (step.action === 'retry') {
        record.updatedAt = iso(clock.now());
        await s.save(record, revision);
        log.warn(
          { attempt: attemptNo, outcome: result.outcome, status: result.status, error: result.error },
          'webhook attempt failed; retrying',
        );
        msg.nak(step.delayMs);
      } else if (step.action === 'delivered') {
        await finish(msg, job, record, revision, 'delivered', log);
      } else {
        await finish(msg, job, record, revision, 'failed', log, step.reason);
      }
    } catch (err) {
      if (err instanceof DeliveryConflictError) {
        // JetStream handed this job to another dispatcher (we stalled past the ack wait); it owns it now.
        log.warn('webhook job taken over by another dispatcher');
        return;
      }
      recordUnavailable(msg, job, log, err);
    }
  }

  /** The record could not be read or written (NATS trouble): JetStream hands the job out again later. */
  function recordUnavailable(msg: JobMessage, job: WebhookJob, log: Logger, err: unknown): void {
    const queuedForMs = clock.now() - msg.info.timestampNanos / 1e6;
    if (queuedForMs > deps.recordGiveUpMs) {
      // Nothing can be recorded either: the log line and the metric are what is left of it.
      metrics.delivery('failed', (clock.now() - Date.parse(job.completedAt)) / 1000 || 0);
      log.error(
        { err: errorText(err), queuedForMs, reason: 'record_unavailable' },
        'webhook delivery failed; giving up: its delivery record could not be read or written',
      );
      msg.term('record_unavailable');
      return;
    }
    const delayMs = storeRetryDelayMs(msg.info.deliveryCount, deps.errorBackoffMs, deps.errorBackoffMaxMs);
    log.warn({ err: errorText(err), delayMs }, 'webhook job not processed; will be redelivered');
    try {
      msg.nak(delayMs);
    } catch {
      // connection gone: ack_wait redelivers
    }
  }

  async function attemptOnce(msg: JobMessage, job: WebhookJob, url: URL | undefined): Promise<AttemptResult> {
    if (!url) return { outcome: 'refused_by_policy', error: 'endpoint is not a valid URL' };
    let secret: string | undefined;
    if (job.target.sealedSecret !== undefined) {
      try {
        secret = secretBox.open(job.target.sealedSecret);
      } catch {
        return {
          outcome: 'refused_by_policy',
          error: 'the signing secret cannot be opened with this platform key',
        };
      }
    }
    const req = buildDeliveryRequest(job, secret, Math.floor(clock.now() / 1000));
    attempting.add(msg);
    heartbeat ??= setInterval(beat, heartbeatMs);
    try {
      return await transport.send(url, req);
    } finally {
      attempting.delete(msg);
      if (attempting.size === 0) {
        clearInterval(heartbeat);
        heartbeat = undefined;
      }
    }
  }

  return handle;
}
