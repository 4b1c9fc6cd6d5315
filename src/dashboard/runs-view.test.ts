import { describe, expect, it } from 'vitest';
import type { RunRecord, WebhookDeliveryRecord } from '../shared/contracts/messaging.ts';
import { runRow, WEBHOOK_WATCH_MS } from './runs-view.ts';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(T0 + ms).toISOString();
const base: RunRecord = {
  runId: 'abc',
  projectId: 'p',
  appName: 'slow',
  path: 'run',
  state: 'queued',
  createdAt: at(0),
  executions: 0,
};
const opts = (now: number) => ({ now: T0 + now, maxResultBytes: 100 });

describe('runRow', () => {
  it('shows an async run and how long it has waited, ran or took', () => {
    expect(runRow(base, undefined, opts(1500))).toMatchObject({
      mode: 'async',
      timing: 'queued for 1.5 s',
      cancellable: true,
      terminal: false,
    });
    const running = { ...base, state: 'running' as const, startedAt: at(1000) };
    expect(runRow(running, undefined, opts(4000)).timing).toBe('running for 3.0 s');
    const done = { ...running, state: 'success' as const, finishedAt: at(3500) };
    expect(runRow(done, undefined, opts(9000))).toMatchObject({
      timing: 'waited 1.0 s, ran 2.5 s',
      cancellable: false,
      terminal: true,
    });
    expect(runRow({ ...running, cancelRequested: true }, undefined, opts(2000)).cancellable).toBe(false);
  });

  it('lists webhook attempts and keeps watching a pending delivery only for a while', () => {
    const done = {
      ...base,
      state: 'success' as const,
      startedAt: at(0),
      finishedAt: at(1000),
      webhookHost: 'h:1',
    };
    expect(runRow(done, undefined, opts(2000)).awaitingWebhook).toBe(true);
    expect(runRow(done, undefined, opts(1000 + WEBHOOK_WATCH_MS)).awaitingWebhook).toBe(false);
    const delivery: WebhookDeliveryRecord = {
      requestId: 'abc',
      projectId: 'p',
      appName: 'slow',
      endpointHost: 'h:1',
      state: 'delivered',
      attempts: [{ attempt: 1, at: at(1100), outcome: 'success', status: 200, durationMs: 12 }],
      updatedAt: at(1100),
    };
    const row = runRow(done, delivery, opts(2000));
    expect(row.awaitingWebhook).toBe(false);
    expect(row.webhook?.attempts).toEqual([
      {
        attempt: 1,
        at: at(1100),
        time: '2026-01-01 00:00:01 UTC',
        outcome: 'success',
        status: '200',
        error: undefined,
        took: '12 ms',
      },
    ]);
    expect(runRow({ ...done, state: 'cancelled' }, undefined, opts(2000)).awaitingWebhook).toBe(false);
  });

  it('says why a finished run shows no result', () => {
    const done = { ...base, state: 'success' as const, startedAt: at(0), finishedAt: at(1) };
    expect(runRow(done, undefined, opts(5)).resultNote).toMatch(/No result was kept/);
    const sync = { ...done, mode: 'sync' as const };
    expect(runRow(sync, undefined, opts(5))).toMatchObject({ mode: 'sync', cancellable: false });
    expect(runRow(sync, undefined, opts(5)).resultNote).toMatch(/Not kept for sync calls/);
    expect(runRow({ ...done, state: 'running' }, undefined, opts(5)).resultNote).toBeUndefined();
  });

  it('lists a result by its metadata and loads its body on demand; a run page formats it within the bound', () => {
    const json = JSON.stringify({ big: 'x'.repeat(500) });
    const done: RunRecord = {
      ...base,
      state: 'success',
      startedAt: at(0),
      finishedAt: at(1),
      result: {
        kept: 'complete',
        contentType: 'application/json',
        sizeBytes: json.length,
        keptBytes: json.length,
      },
    };
    const listed = runRow(done, undefined, opts(5));
    expect(listed.result).toEqual({
      summary: 'application/json · 510 B',
      marks: [],
      shown: undefined,
      binary: false,
    });
    expect(listed.resultUrl).toBe('/dashboard/runs/slow/abc/result');
    const page = runRow(done, undefined, { ...opts(5), resultBytes: Buffer.from(json) });
    expect(page.result?.shown?.text.startsWith('{\n  "big": "xxx')).toBe(true);
    expect(page.result?.shown?.truncated).toBe(true);
    expect(page.result?.shown?.shownBytes).toBeLessThanOrEqual(100);
  });

  it.each([
    [
      'truncated',
      { kept: 'truncated', contentType: 'text/plain', sizeBytes: 3 * 1024 * 1024, keptBytes: 262_144 },
      /truncated: the first 256 KiB of 3.0 MiB are kept/,
    ],
    [
      'dropped',
      { kept: 'dropped', contentType: 'image/png', sizeBytes: 400_000, keptBytes: 0, reason: 'not text' },
      /dropped: none of the 391 KiB is kept \(not text\)/,
    ],
  ] as const)('marks a %s result in words', (kind, result, text) => {
    const done: RunRecord = { ...base, state: 'success', finishedAt: at(1), result: { ...result } };
    const row = runRow(done, undefined, opts(5));
    expect(row.result?.marks).toEqual([{ kind, text: expect.stringMatching(text) }]);
    expect(row.resultUrl).toBe(kind === 'dropped' ? undefined : '/dashboard/runs/slow/abc/result');
  });

  it('marks a streamed result, an expired one, and binary bytes', () => {
    const events = 'data: 1\n\ndata: 2\n\n';
    const streamed: RunRecord = {
      ...base,
      state: 'success',
      finishedAt: at(1),
      streamed: true,
      result: { kept: 'complete', contentType: 'text/event-stream', sizeBytes: 18, keptBytes: 18 },
    };
    const row = runRow(streamed, undefined, { ...opts(5), resultBytes: Buffer.from(events) });
    expect(row.result?.marks.map((m) => m.kind)).toEqual(['streamed']);
    expect(row.result?.shown?.text).toBe(events);
    const gone = runRow(streamed, undefined, { ...opts(5), resultBytes: null });
    expect(gone.result?.marks.map((m) => m.kind)).toEqual(['streamed', 'expired']);
    expect(gone.result?.shown).toBeUndefined();
    const binary = runRow(
      { ...streamed, streamed: false, result: { kept: 'complete', sizeBytes: 2, keptBytes: 2 } },
      undefined,
      { ...opts(5), resultBytes: Uint8Array.from([0xff, 0xfe]) },
    );
    expect(binary.result).toMatchObject({ binary: true, shown: undefined, summary: 'no content type · 2 B' });
  });
});
