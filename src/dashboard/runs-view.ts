/** Run records (+ webhook deliveries) → what the run table and the run page show. Pure. */
import {
  type RunRecord,
  TERMINAL_RUN_STATES,
  type WebhookDeliveryRecord,
} from '../shared/contracts/messaging.ts';
import { formatDuration, formatResult, formatTime, type ShownResult } from './format.ts';

/**
 * Fields later versions of the run record may carry (mode, result): shown when present. The record's
 * own `result` is metadata only (the kept bytes come from RunReader.getResult; management/present.ts
 * presentResult() turns both into the API's shape).
 */
export type RunRecordView = Omit<RunRecord, 'result'> & {
  mode?: 'sync' | 'async';
  result?: { body?: string; bodyBase64?: string; contentType?: string };
};

/** How long after a run finished its page keeps refreshing for the webhook delivery (3 attempts ≤ 5 s apart, plus slack). */
export const WEBHOOK_WATCH_MS = 2 * 60_000;

export const RUN_MODES = ['async', 'sync'] as const;
export type RunMode = (typeof RUN_MODES)[number];

export function runMode(r: RunRecordView): RunMode {
  return r.mode === 'sync' ? 'sync' : 'async';
}

export interface RunRow {
  runId: string;
  shortId: string;
  appName: string;
  path: string;
  href: string;
  mode: RunMode;
  state: string;
  terminal: boolean;
  cancelRequested: boolean;
  cancellable: boolean;
  /** Finished lately and its webhook delivery is still under way: worth refreshing. */
  awaitingWebhook: boolean;
  cancelUrl: string;
  createdAt: string;
  created: string;
  started: string | undefined;
  finished: string | undefined;
  timing: string;
  executions: number;
  responseStatus: number | undefined;
  error: string | undefined;
  webhook:
    | {
        host: string;
        state: string | undefined;
        attempts: Array<{
          attempt: number;
          at: string;
          time: string;
          outcome: string;
          status: string;
          error: string | undefined;
          took: string;
        }>;
      }
    | undefined;
  result: ShownResult | undefined;
  resultNote: string | undefined;
}

function timing(r: RunRecordView, now: number): string {
  const t = (s: string | undefined) => (s ? Date.parse(s) : Number.NaN);
  if (r.state === 'queued') return `queued for ${formatDuration(now - t(r.createdAt))}`;
  if (r.state === 'running') return `running for ${formatDuration(now - t(r.startedAt))}`;
  const waited = formatDuration(t(r.startedAt) - t(r.createdAt));
  const ran = formatDuration(t(r.finishedAt) - t(r.startedAt));
  return r.startedAt
    ? `waited ${waited}, ran ${ran}`
    : `ended after ${formatDuration(t(r.finishedAt) - t(r.createdAt))}`;
}

function resultOf(r: RunRecordView, maxBytes: number): ShownResult | undefined {
  const body =
    r.result?.body ??
    (r.result?.bodyBase64 ? Buffer.from(r.result.bodyBase64, 'base64').toString('utf8') : undefined);
  return body === undefined ? undefined : formatResult(body, maxBytes);
}

export function runRow(
  r: RunRecordView,
  delivery: WebhookDeliveryRecord | undefined,
  opts: { now: number; maxResultBytes: number },
): RunRow {
  const terminal = TERMINAL_RUN_STATES.includes(r.state);
  const base = `/dashboard/runs/${r.appName}/${r.runId}`;
  const result = resultOf(r, opts.maxResultBytes);
  return {
    runId: r.runId,
    shortId: r.runId.length > 13 ? `${r.runId.slice(0, 8)}…` : r.runId,
    appName: r.appName,
    path: r.path,
    href: base,
    mode: runMode(r),
    state: r.state,
    terminal,
    cancelRequested: r.cancelRequested === true,
    cancellable: !terminal && r.cancelRequested !== true,
    awaitingWebhook:
      terminal &&
      r.state !== 'cancelled' &&
      r.webhookHost !== undefined &&
      delivery?.state !== 'delivered' &&
      delivery?.state !== 'failed' &&
      opts.now - Date.parse(r.finishedAt ?? r.createdAt) < WEBHOOK_WATCH_MS,
    cancelUrl: `${base}/cancel`,
    createdAt: r.createdAt,
    created: formatTime(r.createdAt),
    started: r.startedAt ? formatTime(r.startedAt) : undefined,
    finished: r.finishedAt ? formatTime(r.finishedAt) : undefined,
    timing: timing(r, opts.now),
    executions: r.executions,
    responseStatus: r.responseStatus,
    error: r.error ? `${r.error.code}: ${r.error.message}` : undefined,
    webhook: r.webhookHost
      ? {
          host: r.webhookHost,
          state: delivery?.state,
          attempts: (delivery?.attempts ?? []).map((a) => ({
            attempt: a.attempt,
            at: a.at,
            time: formatTime(a.at),
            outcome: a.outcome,
            status: a.status !== undefined ? String(a.status) : a.outcome,
            error: a.error,
            took: formatDuration(a.durationMs),
          })),
        }
      : undefined,
    result,
    resultNote:
      result || !terminal || r.state !== 'success'
        ? undefined
        : 'Not kept by this version of apphost (forward it with webhookEndpoint).',
  };
}
