/**
 * Finishing a run, in the order that never loses one and never contradicts itself: the result bytes (and
 * the webhook's whole body when the result does not hold it), then the final record, then the webhook
 * job built from that record, then the ack. A crash in between redelivers the run: a redelivery that finds
 * the final record queues its webhook job again from it (de-duplicated by its `Nats-Msg-Id`) instead of
 * running or failing the run, and since no webhook job is ever queued before the record is final, a later
 * verdict (another execution, the redelivery cap) can never contradict a webhook already sent. Every write
 * is retried within the worker's write bound (`retry`) while JetStream does not take it.
 */
import type { RunJob, RunRecord, RunResult } from '../shared/contracts/messaging.ts';
import type { Logger } from '../shared/log.ts';
import type { JetStreamPublisher } from '../shared/nats/ack-inbox.ts';
import type { PulledMsg } from '../shared/nats/pull-subscription.ts';
import { publishWebhookJob } from '../webhooks/publish.ts';
import {
  finishRun,
  inlineResult,
  keepResult,
  type RunOutcome,
  webhookBodySource,
  webhookJobFor,
  webhookJobSize,
} from './outcome.ts';
import { inlineResultBytes, isTerminal, type RunStore, type VersionedRun } from './store.ts';

export interface CompleteDeps {
  /** Where webhook jobs are published (the worker's ack inbox). */
  js: JetStreamPublisher;
  store: RunStore;
  now: () => Date;
  maxWebhookBodyBytes: number;
  /** Largest response body kept as the run's result (APPHOST_RUN_RESULT_MAX_BYTES). */
  maxResultBytes: number;
  webhookPublishTimeoutMs: number;
  /** Largest message NATS takes (server max_payload). */
  maxPayload(): number;
  finished(state: RunOutcome['state']): void;
  /** Runs a write again while JetStream refuses it, within the worker's bound (APPHOST_RUN_WRITE_TIMEOUT_MS). */
  retry<T>(what: string, step: () => Promise<T>): Promise<T>;
  /** Acknowledges the run's message (the worker sends it with the other writes of its turn). */
  ack(msg: PulledMsg): void;
}

export async function completeRun(
  msg: PulledMsg,
  job: RunJob,
  outcome: RunOutcome,
  runLog: Logger,
  deps: CompleteDeps,
  /** The record as this execution last wrote it (running): the final write then needs no re-read. */
  from?: VersionedRun,
): Promise<void> {
  const { store } = deps;
  const at = deps.now();
  let result: RunResult | undefined;
  if ('body' in outcome) {
    // Bounded by NATS too: a KV value is one message (a little room for the headers).
    const kept = keepResult(outcome, Math.min(deps.maxResultBytes, deps.maxPayload() - 4096));
    result = kept.result;
    const bytes = kept.bytes;
    // Small bytes go inside the final record (one write fewer); larger ones first, under their own key.
    const inline = bytes ? inlineResult(kept.result, bytes) : undefined;
    if (inline) result = inline;
    else if (bytes) {
      try {
        await deps.retry('storing the run result', () =>
          store.putResult(job.projectId, job.appName, job.requestId, bytes),
        );
      } catch (err) {
        // The function ran: storing its result must not make it run again.
        runLog.warn({ err, size: bytes.length }, 'could not store the run result; it is marked dropped');
        result = { ...kept.result, kept: 'dropped', keptBytes: 0, reason: 'the run store did not take it' };
      }
    }
    if (result.kept !== 'complete')
      runLog.info(
        { kept: result.kept, size: result.sizeBytes, keptBytes: result.keptBytes },
        'run result over the bound',
      );
    // The record about to be written names where its webhook body is: when not in the result, it is
    // stored first, so a redelivery can queue the same webhook job again.
    const intended = finishRun(undefined, job, outcome, at, result) as RunRecord;
    if (
      job.webhook &&
      webhookBodySource(intended, deps.maxWebhookBodyBytes).from === 'stored' &&
      webhookJobSize(intended, job, outcome.body.length) <= deps.maxPayload()
    ) {
      await deps.retry('storing the webhook body', () =>
        store.putWebhookBody(job.projectId, job.appName, job.requestId, outcome.body),
      );
    }
  }
  let mine: RunRecord | undefined;
  const { record: stored } = await deps.retry('writing the final run record', () =>
    store.change(
      job.projectId,
      job.appName,
      job.requestId,
      (cur) => {
        mine = finishRun(cur, job, outcome, at, result);
        return mine;
      },
      from,
    ),
  );
  // Not ours when the record was final already (another execution, or our own write whose answer was
  // lost): the webhook then tells what the record says, read back from the store.
  const ours = mine !== undefined && stored === mine;
  if (ours) {
    deps.finished(outcome.state);
    runLog.info({ state: outcome.state }, 'run finished');
  } else {
    runLog.info(
      { state: stored?.state, ours: outcome.state },
      'run already finished; keeping its recorded outcome',
    );
  }
  await finishDelivery(msg, job, stored, runLog, deps, ours && 'body' in outcome ? outcome.body : undefined);
}

/**
 * The end of every delivery of a run whose record is final: its webhook job is queued (again: de-duplicated
 * by JetStream, and by the dispatcher's delivery record) and the message is acked. `body` is the app's
 * answer when this process has it; otherwise it is read back from where the record says it is.
 */
export async function finishDelivery(
  msg: PulledMsg,
  job: RunJob,
  rec: RunRecord | undefined,
  runLog: Logger,
  deps: CompleteDeps,
  body?: Buffer,
): Promise<void> {
  if (job.webhook && rec && isTerminal(rec.state)) await queueWebhook(job, rec, runLog, deps, body);
  // Not waited for: the record is final and the webhook job queued, so a lost ack only redelivers the
  // run, and a redelivery that finds the final record just queues the same (de-duplicated) job again.
  deps.ack(msg);
}

async function queueWebhook(
  job: RunJob,
  rec: RunRecord,
  runLog: Logger,
  deps: CompleteDeps,
  known?: Buffer,
): Promise<void> {
  const { store } = deps;
  const source = webhookBodySource(rec, deps.maxWebhookBodyBytes);
  if (source.from === 'none') return;
  const size = source.from === 'error' ? source.body.length : source.size;
  // A job NATS can never take (base64 body + envelope over max_payload) must not hold the run: that
  // would hand it back and execute the function again.
  if (source.from === 'too_large' || webhookJobSize(rec, job, size) > deps.maxPayload()) {
    runLog.warn({ size }, 'response too large to forward to the webhook');
    return;
  }
  let body: Uint8Array | undefined = source.from === 'error' ? source.body : known;
  if (!body && source.from === 'result') body = inlineResultBytes(rec);
  if (!body && source.from === 'result')
    body = await deps.retry('reading the run result', () =>
      store.getResult(job.projectId, job.appName, job.requestId),
    );
  if (!body && source.from === 'stored')
    body = await deps.retry('reading the webhook body', () =>
      store.getWebhookBody(job.projectId, job.appName, job.requestId),
    );
  if (!body) {
    // Removed only after its job was queued (or written by a release that queued the job first).
    runLog.info('webhook body no longer stored: its job was queued before');
    return;
  }
  const webhookJob = webhookJobFor(rec, job, Buffer.from(body));
  if (!webhookJob) return;
  await deps.retry('queueing the webhook job', () =>
    publishWebhookJob(deps.js, webhookJob, deps.webhookPublishTimeoutMs),
  );
  if (source.from === 'stored')
    await store.deleteWebhookBody(job.projectId, job.appName, job.requestId).catch((err: unknown) => {
      runLog.debug({ err }, 'could not remove the stored webhook body; it expires with the record');
    });
}
