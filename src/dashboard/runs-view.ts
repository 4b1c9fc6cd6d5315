/** Run records (+ webhook deliveries) → what the run table and the run page show. Pure. */
import { presentResult } from '../management/present.ts';
import {
  type RunRecord,
  type RunResult,
  TERMINAL_RUN_STATES,
  type WebhookDeliveryRecord,
} from '../shared/contracts/messaging.ts';
import { boundText, formatBytes, formatDuration, formatTime, type ShownResult } from './format.ts';

/** How long after a run finished its page keeps refreshing for the webhook delivery (3 attempts ≤ 5 s apart, plus slack). */
export const WEBHOOK_WATCH_MS = 2 * 60_000;

export const RUN_MODES = ['async', 'sync'] as const;
export type RunMode = (typeof RUN_MODES)[number];

export function runMode(r: RunRecord): RunMode {
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
  result: ResultView | undefined;
  /** Where the result's formatted body is fetched from (the table loads it when opened). */
  resultUrl: string | undefined;
  resultNote: string | undefined;
}

export type ResultMarkKind = 'truncated' | 'dropped' | 'expired' | 'streamed';

/** What the run record kept of the function's response, as the pages show it. */
export interface ResultView {
  /** Content type and size of the whole response, e.g. `application/json · 1.5 KiB`. */
  summary: string;
  /** Everything that is not the plain, complete response, said in words. */
  marks: Array<{ kind: ResultMarkKind; text: string }>;
  /** The kept body formatted (JSON pretty-printed), within the page's bound; absent when not read or binary. */
  shown: ShownResult | undefined;
  /** The kept bytes are not text: not shown (the API gives them as base64). */
  binary: boolean;
}

/**
 * The result as the API presents it (management/present.ts: one rule for both), then formatted for a
 * page: `bytes` undefined → metadata only (lists); null → looked for and gone.
 */
export function resultView(
  meta: RunResult,
  streamed: boolean,
  bytes: Uint8Array | null | undefined,
  maxShownBytes: number,
): ResultView {
  const p = presentResult(meta, bytes);
  const marks: ResultView['marks'] = [];
  if (streamed)
    marks.push({
      kind: 'streamed',
      text: 'streamed: the function answered text/event-stream; this is the event stream as it was sent',
    });
  if (p.state === 'truncated')
    marks.push({
      kind: 'truncated',
      text: `truncated: the first ${formatBytes(p.kept_bytes)} of ${formatBytes(p.size_bytes)} are kept`,
    });
  if (p.state === 'dropped')
    marks.push({
      kind: 'dropped',
      text: `dropped: none of the ${formatBytes(p.size_bytes)} is kept${p.reason ? ` (${p.reason})` : ''}`,
    });
  if (p.state === 'expired')
    marks.push({ kind: 'expired', text: 'expired: the kept bytes are no longer stored' });
  let shown: ShownResult | undefined;
  if (p.encoding === 'json') shown = boundText(JSON.stringify(p.json, null, 2), maxShownBytes);
  else if (p.encoding === 'utf8' && p.body !== undefined) shown = boundText(p.body, maxShownBytes);
  return {
    summary: `${p.content_type ?? 'no content type'} · ${formatBytes(p.size_bytes)}`,
    marks,
    shown,
    binary: p.encoding === 'base64',
  };
}

function timing(r: RunRecord, now: number): string {
  const t = (s: string | undefined) => (s ? Date.parse(s) : Number.NaN);
  if (r.state === 'queued') return `queued for ${formatDuration(now - t(r.createdAt))}`;
  if (r.state === 'running') return `running for ${formatDuration(now - t(r.startedAt))}`;
  const waited = formatDuration(t(r.startedAt) - t(r.createdAt));
  const ran = formatDuration(t(r.finishedAt) - t(r.startedAt));
  return r.startedAt
    ? `waited ${waited}, ran ${ran}`
    : `ended after ${formatDuration(t(r.finishedAt) - t(r.createdAt))}`;
}

/** Why a finished run shows no result. */
function noResultNote(r: RunRecord): string | undefined {
  if (r.mode === 'sync') return 'Not kept for sync calls: the caller received it.';
  if (r.state === 'success') return 'No result was kept for this run.';
  return undefined;
}

/**
 * `resultBytes`: the kept bytes of the result when they were read (a run's own page); lists leave it
 * undefined and show the result's metadata, its body loaded on demand from `resultUrl`.
 */
export function runRow(
  r: RunRecord,
  delivery: WebhookDeliveryRecord | undefined,
  opts: { now: number; maxResultBytes: number; resultBytes?: Uint8Array | null },
): RunRow {
  const terminal = TERMINAL_RUN_STATES.includes(r.state);
  const base = `/dashboard/runs/${r.appName}/${r.runId}`;
  const result = r.result
    ? resultView(r.result, r.streamed === true, opts.resultBytes, opts.maxResultBytes)
    : undefined;
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
    resultUrl: r.result && r.result.kept !== 'dropped' ? `${base}/result` : undefined,
    resultNote: result || !terminal ? undefined : noResultNote(r),
  };
}
