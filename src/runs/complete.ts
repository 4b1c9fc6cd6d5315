/**
 * Finishing a run, in the order that never loses one: the webhook job first, then the result bytes,
 * then the final record, then the ack. A crash in between redelivers the run, never drops it; a record
 * that names a result always finds its bytes.
 */
import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { RunJob, RunResult } from '../shared/contracts/messaging.ts';
import type { Logger } from '../shared/log.ts';
import { makeWebhookJob, publishWebhookJob } from '../webhooks/publish.ts';
import { finishRun, keepResult, type RunOutcome, webhookResponse } from './outcome.ts';
import type { RunStore } from './store.ts';

export interface CompleteDeps {
  js: JetStreamClient;
  store: RunStore;
  now: () => Date;
  maxWebhookBodyBytes: number;
  /** Largest response body kept as the run's result (APPHOST_RUN_RESULT_MAX_BYTES). */
  maxResultBytes: number;
  webhookPublishTimeoutMs: number;
  /** Largest message NATS takes (server max_payload). */
  maxPayload(): number;
  finished(state: RunOutcome['state']): void;
}

export async function completeRun(
  msg: JsMsg,
  job: RunJob,
  outcome: RunOutcome,
  runLog: Logger,
  deps: CompleteDeps,
): Promise<void> {
  const hook = webhookResponse(outcome);
  if (job.webhook && hook) {
    const webhookJob =
      ('size' in outcome ? outcome.size : hook.body.length) > deps.maxWebhookBodyBytes
        ? undefined
        : makeWebhookJob({
            requestId: job.requestId,
            projectId: job.projectId,
            appName: job.appName,
            target: job.webhook,
            status: hook.status,
            contentType: hook.contentType,
            body: hook.body,
            runStatus: hook.runStatus,
            completedAt: deps.now(),
          });
    // A job NATS can never take (base64 body + envelope over max_payload) must not fail the
    // completion: that would nak the run and execute the function again.
    if (!webhookJob || Buffer.byteLength(JSON.stringify(webhookJob)) > deps.maxPayload()) {
      runLog.warn({ size: hook.body.length }, 'response too large to forward to the webhook');
    } else {
      await publishWebhookJob(deps.js, webhookJob, deps.webhookPublishTimeoutMs);
    }
  }
  let result: RunResult | undefined;
  if ('body' in outcome) {
    // Bounded by NATS too: a KV value is one message (a little room for the headers).
    const kept = keepResult(outcome, Math.min(deps.maxResultBytes, deps.maxPayload() - 4096));
    result = kept.result;
    if (kept.bytes) {
      try {
        await deps.store.putResult(job.projectId, job.appName, job.requestId, kept.bytes);
      } catch (err) {
        // The function ran: storing its result must not make it run again.
        runLog.warn({ err, size: kept.bytes.length }, 'could not store the run result; it is marked dropped');
        result = { ...kept.result, kept: 'dropped', keptBytes: 0, reason: 'the run store did not take it' };
      }
    }
    if (result.kept !== 'complete')
      runLog.info(
        { kept: result.kept, size: result.sizeBytes, keptBytes: result.keptBytes },
        'run result over the bound',
      );
  }
  await deps.store.update(job.projectId, job.appName, job.requestId, (cur) =>
    finishRun(cur, job, outcome, deps.now(), result),
  );
  deps.finished(outcome.state);
  runLog.info({ state: outcome.state }, 'run finished');
  await msg.ackAck().catch(() => msg.ack());
}
