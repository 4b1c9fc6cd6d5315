/** Pure decisions of the run worker: what a run's record becomes, given what happened. */

import { MAX_RESPONSE_GRACE_PERIOD_SECONDS } from '../apis/v1alpha1/types.ts';
import {
  type RunJob,
  type RunRecord,
  type RunResult,
  RunState,
  type WebhookJob,
} from '../shared/contracts/messaging.ts';
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

/** Next record when a worker picks the run up: running, or cancelled, or undefined = leave it (terminal). */
export function startRun(current: RunRecord | undefined, job: RunJob, now: Date): RunRecord | undefined {
  const base = current ?? queuedRecordFor(job);
  if (isTerminal(base.state)) return undefined;
  if (base.cancelRequested) return { ...base, state: RunState.Cancelled, finishedAt: now.toISOString() };
  return { ...base, state: RunState.Running, startedAt: now.toISOString(), executions: base.executions + 1 };
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

/** What the webhook receives for an outcome (nothing for a cancelled run). */
export function webhookResponse(
  outcome: RunOutcome,
): { status: number; contentType?: string; body: Buffer; runStatus: WebhookJob['runStatus'] } | undefined {
  if (outcome.state === 'cancelled') return undefined;
  if ('body' in outcome) {
    return {
      status: outcome.status,
      ...(outcome.contentType ? { contentType: outcome.contentType } : {}),
      body: outcome.body,
      runStatus: outcome.state,
    };
  }
  const status = outcome.state === 'timeout' ? 504 : 502;
  return {
    status,
    contentType: 'application/json',
    body: Buffer.from(JSON.stringify({ error: outcome.error })),
    runStatus: outcome.state,
  };
}
