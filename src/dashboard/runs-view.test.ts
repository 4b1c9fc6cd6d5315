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

  it('shows a recorded result bounded, and says when none is kept', () => {
    const done = { ...base, state: 'success' as const, startedAt: at(0), finishedAt: at(1) };
    expect(runRow(done, undefined, opts(5)).resultNote).toMatch(/Not kept/);
    const withResult = {
      ...done,
      mode: 'sync' as const,
      result: { body: JSON.stringify({ big: 'x'.repeat(500) }) },
    };
    const row = runRow(withResult, undefined, opts(5));
    expect(row.mode).toBe('sync');
    expect(row.result?.truncated).toBe(true);
    expect(row.resultNote).toBeUndefined();
  });
});
