/** Pure decisions of the run worker: what a run's record becomes, given what happened. */

import { MAX_RESPONSE_GRACE_PERIOD_SECONDS } from '../apis/v1alpha1/types.ts';
import { type RunJob, type RunRecord, RunState, type WebhookJob } from '../shared/contracts/messaging.ts';
import { isTerminal } from './store.ts';

export type RunOutcome =
  | {
      state: 'success' | 'failure';
      status: number;
      contentType?: string;
      body: Buffer;
      error?: RunRecord['error'];
    }
  | { state: 'timeout'; error: NonNullable<RunRecord['error']> }
  | { state: 'failure'; status?: undefined; error: NonNullable<RunRecord['error']> }
  | { state: 'cancelled' };

/** The record a job implies when the gateway's queued record is missing (e.g. its write failed). */
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

/** Next record when the run finished; a terminal record is never overwritten. */
export function finishRun(
  current: RunRecord | undefined,
  job: RunJob,
  outcome: RunOutcome,
  now: Date,
): RunRecord | undefined {
  const base = current ?? queuedRecordFor(job);
  if (isTerminal(base.state)) return undefined;
  const next: RunRecord = { ...base, state: outcome.state, finishedAt: now.toISOString() };
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
