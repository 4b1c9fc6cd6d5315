/**
 * The webhook dispatcher: pulls delivery jobs from the shared durable WEBHOOKS consumer and makes one
 * attempt per JetStream delivery. Retries are JetStream redeliveries (`nak(delay)`), so a dispatcher
 * that dies between attempts loses nothing; the attempt count lives in the delivery record, which is
 * written before each attempt starts, so a dispatcher that dies during an attempt cannot cause a 4th.
 */
import { type Consumer, type JsMsg, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Registry } from 'prom-client';
import { type Clock, systemClock } from '../shared/clock.ts';
import {
  WEBHOOKS_STREAM,
  type WebhookAttempt,
  type WebhookDeliveryRecord,
  type WebhookJob,
} from '../shared/contracts/messaging.ts';
import type { Logger } from '../shared/log.ts';
import type { SecretBox } from '../shared/secretbox.ts';
import { createDeliveryStore, DeliveryConflictError, type DeliveryStore } from './deliveries.ts';
import { type AttemptResult, createHttpTransport, type DeliveryTransport } from './http-transport.ts';
import { createWebhookMetrics, type WebhookMetrics } from './metrics.ts';
import { MAX_ATTEMPTS, nextStep } from './retry-policy.ts';
import type { WebhookSettings } from './settings.ts';
import { buildDeliveryRequest } from './signing.ts';
import { createSsrfGuard, errorText, type ResolveHost, systemResolveHost } from './ssrf.ts';
import { openDeliveriesBucket, WEBHOOKS_ACK_WAIT_MS, WEBHOOKS_CONSUMER } from './stream.ts';

/** A job redelivered this often without finishing (e.g. its record cannot be written) is given up. */
export const MAX_DELIVERIES = 10;
/** What a started attempt says until its real outcome replaces it; it stays if the dispatcher died. */
export const INTERRUPTED_ATTEMPT = 'interrupted: the dispatcher stopped before this attempt finished';
/** How often an in-flight attempt tells JetStream it is still being worked on. */
const HEARTBEAT_MS = Math.floor(WEBHOOKS_ACK_WAIT_MS / 3);

export interface WebhookDispatcherDeps {
  nc: NatsConnection;
  secretBox: SecretBox;
  log: Logger;
  registry: Registry;
  settings: WebhookSettings;
  clock?: Clock;
  resolveHost?: ResolveHost;
  /** The deliveries bucket (see `openDeliveriesBucket`); opened from `nc` when absent. */
  deliveriesKv?: KV;
  /** Replaces the HTTP transport (tests of faults the network cannot produce). */
  transport?: DeliveryTransport;
}

export interface WebhookDispatcher {
  start(): Promise<void>;
  /** Stops pulling and waits up to `boundMs` for in-flight attempts to finish. */
  stop(boundMs: number): Promise<void>;
  /** Attempts in flight now. */
  inFlight(): number;
}

export function parseWebhookJob(data: Uint8Array): WebhookJob {
  const job = JSON.parse(Buffer.from(data).toString('utf8')) as Partial<WebhookJob>;
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

export function createWebhookDispatcher(deps: WebhookDispatcherDeps): WebhookDispatcher {
  const clock = deps.clock ?? systemClock;
  const { settings } = deps;
  const metrics: WebhookMetrics = createWebhookMetrics(deps.registry);
  const transport =
    deps.transport ??
    createHttpTransport({
      guard: createSsrfGuard({
        allowCidrs: settings.allowCidrs,
        resolveHost: deps.resolveHost ?? systemResolveHost,
      }),
      attemptTimeoutMs: settings.attemptTimeoutMs,
      maxResponseBytes: settings.maxResponseBytes,
    });
  let store: DeliveryStore | undefined;
  let running = false;
  let inFlight = 0;
  const loops: Promise<void>[] = [];
  const batches = new Set<{ stop(err?: Error): void }>();
  const iso = (ms: number) => new Date(ms).toISOString();

  async function finish(
    msg: JsMsg,
    job: WebhookJob,
    record: WebhookDeliveryRecord,
    revision: number,
    result: 'delivered' | 'failed',
    log: Logger,
    why?: string,
  ): Promise<void> {
    record.state = result;
    record.updatedAt = iso(clock.now());
    await (store as DeliveryStore).save(record, revision);
    const seconds = (clock.now() - Date.parse(job.completedAt)) / 1000;
    metrics.delivery(result, Number.isFinite(seconds) ? seconds : 0);
    const attempts = record.attempts.map((a) => ({
      attempt: a.attempt,
      outcome: a.outcome,
      status: a.status,
      error: a.error,
    }));
    if (result === 'delivered') {
      log.info({ attempts }, 'webhook delivered');
      msg.ack();
    } else {
      log.error({ attempts, reason: why }, 'webhook delivery failed; giving up');
      msg.term(why);
    }
  }

  async function handle(msg: JsMsg): Promise<void> {
    let job: WebhookJob;
    try {
      job = parseWebhookJob(msg.data);
    } catch (err) {
      deps.log.error(
        { seq: msg.seq, subject: msg.subject, err: errorText(err) },
        'malformed webhook job dropped',
      );
      msg.term('malformed job');
      return;
    }
    let url: URL | undefined;
    try {
      url = new URL(job.target.endpoint);
    } catch {
      url = undefined;
    }
    const endpointHost = url?.hostname ?? '(invalid)';
    const log = deps.log.child({ requestId: job.requestId, endpointHost });
    const s = store as DeliveryStore;
    try {
      const loaded = await s.load(job.requestId);
      let revision = loaded?.revision ?? 0;
      const record: WebhookDeliveryRecord = loaded?.record ?? {
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
      if (msg.info.deliveryCount > MAX_DELIVERIES) {
        await finish(msg, job, record, revision, 'failed', log, 'too_many_redeliveries');
        return;
      }
      const attemptNo = record.attempts.length + 1;
      const startedAt = clock.now();
      const attempt: WebhookAttempt = {
        attempt: attemptNo,
        at: iso(startedAt),
        outcome: 'network_error',
        error: INTERRUPTED_ATTEMPT,
        durationMs: 0,
      };
      record.attempts.push(attempt);
      record.updatedAt = iso(startedAt);
      // Written before the attempt starts, so an attempt cut short by a crash still counts.
      revision = await s.save(record, revision);

      const result = await attemptOnce(msg, job, url);
      attempt.durationMs = clock.now() - startedAt;
      attempt.outcome = result.outcome;
      if (result.status !== undefined) attempt.status = result.status;
      if (result.error !== undefined) attempt.error = result.error;
      else delete attempt.error;
      metrics.attempt(result.outcome, attempt.durationMs / 1000);

      const step = nextStep(result.outcome, attemptNo, { retryDelayMs: settings.retryDelayMs });
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
      // The record could not be read or written (NATS trouble): let JetStream hand the job out again.
      log.warn({ err: errorText(err) }, 'webhook job not processed; will be redelivered');
      try {
        msg.nak(settings.errorBackoffMs);
      } catch {
        // connection gone: ack_wait redelivers
      }
    }
  }

  async function attemptOnce(msg: JsMsg, job: WebhookJob, url: URL | undefined): Promise<AttemptResult> {
    if (!url) return { outcome: 'refused_by_policy', error: 'endpoint is not a valid URL' };
    let secret: string | undefined;
    if (job.target.sealedSecret !== undefined) {
      try {
        secret = deps.secretBox.open(job.target.sealedSecret);
      } catch {
        return {
          outcome: 'refused_by_policy',
          error: 'the signing secret cannot be opened with this platform key',
        };
      }
    }
    const req = buildDeliveryRequest(job, secret, Math.floor(clock.now() / 1000));
    const heartbeat = setInterval(() => {
      try {
        msg.working();
      } catch {
        // connection gone: nothing to extend
      }
    }, HEARTBEAT_MS);
    try {
      return await transport.send(url, req);
    } finally {
      clearInterval(heartbeat);
    }
  }

  async function loop(consumer: Consumer) {
    while (running) {
      try {
        const batch = await consumer.fetch({ max_messages: 1, expires: settings.pullExpiresMs });
        batches.add(batch);
        try {
          for await (const msg of batch) {
            if (!running) {
              msg.nak();
              continue;
            }
            inFlight++;
            try {
              await handle(msg);
            } finally {
              inFlight--;
            }
          }
        } finally {
          batches.delete(batch);
        }
      } catch (err) {
        if (!running) break;
        deps.log.warn({ err: errorText(err) }, 'pulling webhook jobs failed; backing off');
        await clock.sleep(settings.errorBackoffMs).catch(() => {});
      }
    }
  }

  return {
    async start() {
      if (running) return;
      if (!store) {
        const kv = deps.deliveriesKv ?? (await openDeliveriesBucket(await jetstreamManager(deps.nc)));
        store = createDeliveryStore(kv);
      }
      const consumer = await jetstream(deps.nc).consumers.get(WEBHOOKS_STREAM, WEBHOOKS_CONSUMER);
      running = true;
      for (let i = 0; i < settings.concurrency; i++) loops.push(loop(consumer));
      deps.log.info({ concurrency: settings.concurrency }, 'webhook dispatcher started');
    },
    async stop(boundMs) {
      if (!running) return;
      running = false;
      for (const b of batches) b.stop();
      const all = Promise.all(loops.splice(0));
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<'bound'>((resolve) => {
        timer = setTimeout(() => resolve('bound'), boundMs);
      });
      const r = await Promise.race([all.then(() => 'done' as const), bound]);
      clearTimeout(timer);
      if (r === 'bound') deps.log.warn({ inFlight, boundMs }, 'stop bound passed with attempts in flight');
      else deps.log.info('webhook dispatcher stopped');
    },
    inFlight: () => inFlight,
  };
}
