/** Pure decisions of the run worker: what a run's record becomes, given what happened. */

import { MAX_RESPONSE_GRACE_PERIOD_SECONDS } from '../apis/v1alpha1/types.ts';
import {
  type RunJob,
  type RunRecord,
  type RunResult,
  RunState,
  type WebhookJob,
} from '../shared/contracts/messaging.ts';
import { makeWebhookJob } from '../webhooks/publish.ts';
import { isTerminal } from './store.ts';

export type RunOutcome =
  | {
      state: 'success' | 'failure';
      status: number;
      contentType?: string;
      /** The response as read: all of it, or a prefix at least one byte past the largest bound. */
      body: Buffer;
      /** Size of the whole response body. */
      size: number;
      error?: RunRecord['error'];
    }
  | { state: 'timeout'; error: NonNullable<RunRecord['error']> }
  | { state: 'failure'; status?: undefined; error: NonNullable<RunRecord['error']> }
  | { state: 'cancelled' };

/**
 * The record of a queued run: written by the gateway once the job is queued, and by the worker when that
 * write failed.
 */
export function queuedRecordFor(job: RunJob): RunRecord {
  return {
    runId: job.requestId,
    projectId: job.projectId,
    appName: job.appName,
    path: job.path,
    state: RunState.Queued,
    createdAt: job.acceptedAt,
    executions: 0,
    ...(job.webhook ? { webhookHost: safeHost(job.webhook.endpoint) } : {}),
  };
}

function safeHost(endpoint: string): string {
  try {
    return new URL(endpoint).host;
  } catch {
    return '';
  }
}

/**
 * Next record when a worker picks the run up: running, or cancelled, or undefined = leave it (terminal,
 * or already running under this `executionId`: a retried write whose answer was lost took the first time).
 */
export function startRun(
  current: RunRecord | undefined,
  job: RunJob,
  now: Date,
  executionId: string,
): RunRecord | undefined {
  const base = current ?? queuedRecordFor(job);
  if (isTerminal(base.state)) return undefined;
  if (base.state === RunState.Running && base.executionId === executionId) return undefined;
  if (base.cancelRequested) return { ...base, state: RunState.Cancelled, finishedAt: now.toISOString() };
  return {
    ...base,
    state: RunState.Running,
    startedAt: now.toISOString(),
    executions: base.executions + 1,
    executionId,
  };
}

/** Whether a prefix of this content type is still readable (so an oversize one is truncated, not dropped). */
export function isTextual(contentType: string | undefined): boolean {
  const t = (contentType ?? '').toLowerCase().split(';')[0]?.trim() ?? '';
  return (
    t.startsWith('text/') ||
    t === 'application/json' ||
    t.endsWith('+json') ||
    t === 'application/x-ndjson' ||
    t === 'application/xml' ||
    t.endsWith('+xml')
  );
}

/** Length of the longest prefix of `buf` within `max` bytes that does not split a UTF-8 character. */
export function utf8Prefix(buf: Buffer, max: number): number {
  if (buf.length <= max) return buf.length;
  let end = max;
  // Step back over continuation bytes (10xxxxxx) to the start of the character that crosses `max`.
  while (end > 0 && ((buf[end] as number) & 0xc0) === 0x80) end--;
  return end;
}

/**
 * What the run record keeps of a response and the bytes to store: all of it within `maxBytes`; over it, a
 * textual response keeps its first `maxBytes` (at a character boundary) and anything else is dropped.
 */
export function keepResult(
  outcome: { contentType?: string; body: Buffer; size: number },
  maxBytes: number,
): { result: RunResult; bytes?: Buffer } {
  const meta = {
    ...(outcome.contentType ? { contentType: outcome.contentType } : {}),
    sizeBytes: outcome.size,
  };
  if (outcome.size <= maxBytes && outcome.body.length === outcome.size)
    return { result: { kept: 'complete', ...meta, keptBytes: outcome.size }, bytes: outcome.body };
  if (isTextual(outcome.contentType) && maxBytes > 0) {
    const bytes = outcome.body.subarray(0, utf8Prefix(outcome.body, maxBytes));
    return { result: { kept: 'truncated', ...meta, keptBytes: bytes.length }, bytes };
  }
  return {
    result: {
      kept: 'dropped',
      ...meta,
      keptBytes: 0,
      reason: `larger than the ${maxBytes} bytes a run record keeps, and not text`,
    },
  };
}

/**
 * Kept results up to this size travel inside the final record (`RunResult.inlineBase64`) instead of under
 * their own key: one KV write per run fewer (most function answers are small), and the bytes and the
 * record that points at them are stored in one write. Larger ones keep their own key, so a record stays
 * small for lists.
 */
export const RUN_RESULT_INLINE_MAX_BYTES = 1024;

/** The result with its bytes inside it, when they are small enough; else undefined (stored on their own). */
export function inlineResult(result: RunResult, bytes: Uint8Array): RunResult | undefined {
  if (bytes.length > RUN_RESULT_INLINE_MAX_BYTES) return undefined;
  return {
    ...result,
    inlineBase64: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('base64'),
  };
}

/** Next record when the run finished; a terminal record is never overwritten. */
export function finishRun(
  current: RunRecord | undefined,
  job: RunJob,
  outcome: RunOutcome,
  now: Date,
  result?: RunResult,
): RunRecord | undefined {
  const base = current ?? queuedRecordFor(job);
  if (isTerminal(base.state)) return undefined;
  const next: RunRecord = { ...base, state: outcome.state, finishedAt: now.toISOString() };
  if (result) {
    next.result = result;
    if ((result.contentType ?? '').toLowerCase().startsWith('text/event-stream')) next.streamed = true;
  }
  if ('status' in outcome && outcome.status !== undefined) next.responseStatus = outcome.status;
  if ('error' in outcome && outcome.error) next.error = outcome.error;
  else delete next.error;
  return next;
}

/** Grace period in ms, clamped to [1 s, 12 h]. */
export function graceMs(job: RunJob): number {
  const s = Number.isFinite(job.gracePeriodSeconds) ? job.gracePeriodSeconds : 900;
  return Math.min(Math.max(s, 1), MAX_RESPONSE_GRACE_PERIOD_SECONDS) * 1000;
}

/**
 * Where the body of a finished run's webhook comes from — the webhook always tells what the final record
 * says, so it is decided from the record: nothing for a cancelled run; the error as JSON (502, or 504 for a
 * timeout) when the app gave no answer; else the app's answer — the kept result when it holds all of it,
 * else the body stored for the webhook (`runWebhookBodyKey`), unless it is over `maxBodyBytes`.
 */
export type WebhookBodySource =
  | { from: 'none' }
  | { from: 'error'; status: number; contentType: string; body: Buffer }
  | { from: 'result' | 'stored'; size: number }
  | { from: 'too_large'; size: number };

export function webhookBodySource(
  rec: Pick<RunRecord, 'state' | 'responseStatus' | 'error' | 'result'>,
  maxBodyBytes: number,
): WebhookBodySource {
  if (rec.state === RunState.Cancelled || !isTerminal(rec.state)) return { from: 'none' };
  if (rec.responseStatus === undefined || !rec.result) {
    return {
      from: 'error',
      status: rec.state === RunState.Timeout ? 504 : 502,
      contentType: 'application/json',
      body: Buffer.from(JSON.stringify({ error: rec.error })),
    };
  }
  const size = rec.result.sizeBytes;
  if (size > maxBodyBytes) return { from: 'too_large', size };
  return { from: rec.result.kept === 'complete' ? 'result' : 'stored', size };
}

/** The webhook job of a finished run, from its final record and the body `webhookBodySource` named. */
export function webhookJobFor(rec: RunRecord, job: RunJob, body: Buffer): WebhookJob | undefined {
  const source = webhookBodySource(rec, Number.POSITIVE_INFINITY);
  if (!job.webhook || source.from === 'none' || source.from === 'too_large') return undefined;
  const fromApp = source.from !== 'error';
  return makeWebhookJob({
    requestId: job.requestId,
    projectId: job.projectId,
    appName: job.appName,
    target: job.webhook,
    status: fromApp ? (rec.responseStatus as number) : source.status,
    contentType: fromApp ? rec.result?.contentType : source.contentType,
    body,
    runStatus: rec.state as WebhookJob['runStatus'],
    completedAt: new Date(rec.finishedAt ?? job.acceptedAt),
  });
}

/** Size of the serialized webhook job of `rec` with a body of `bodySize` bytes (base64 has no escapes). */
export function webhookJobSize(rec: RunRecord, job: RunJob, bodySize: number): number {
  const empty = webhookJobFor(rec, job, Buffer.alloc(0));
  return empty ? Buffer.byteLength(JSON.stringify(empty)) + 4 * Math.ceil(bodySize / 3) : 0;
}
