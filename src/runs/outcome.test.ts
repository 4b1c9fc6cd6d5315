import { describe, expect, it } from 'vitest';
import type { RunJob, RunRecord } from '../shared/contracts/messaging.ts';
import {
  finishRun,
  graceMs,
  isTextual,
  keepResult,
  queuedRecordFor,
  startRun,
  utf8Prefix,
  webhookBodySource,
  webhookJobFor,
  webhookJobSize,
} from './outcome.ts';

const job: RunJob = {
  v: 1,
  requestId: 'r1',
  projectId: 'p',
  appName: 'a',
  path: 'f',
  query: '',
  headers: {},
  bodyBase64: '',
  webhook: { endpoint: 'https://hooks.example.com/x?k=secret' },
  acceptedAt: '2026-01-01T00:00:00.000Z',
  gracePeriodSeconds: 900,
};
const now = new Date('2026-01-01T00:01:00.000Z');
const rec = (over: Partial<RunRecord>): RunRecord => ({ ...queuedRecordFor(job), ...over });

describe('queuedRecordFor', () => {
  it('keeps only the webhook host, never the full URL', () => {
    expect(queuedRecordFor(job).webhookHost).toBe('hooks.example.com');
    expect(JSON.stringify(queuedRecordFor(job))).not.toContain('secret');
  });
});

describe('startRun', () => {
  it('queued → running with executions + 1', () => {
    expect(startRun(rec({}), job, now, 'e1')).toMatchObject({
      state: 'running',
      executions: 1,
      startedAt: now.toISOString(),
    });
  });
  it('a redelivered running run starts again and counts the execution', () => {
    expect(
      startRun(rec({ state: 'running', executions: 1, executionId: 'e0' }), job, now, 'e1'),
    ).toMatchObject({
      state: 'running',
      executions: 2,
    });
  });
  it('a start of its own that took although its answer was lost is not counted again', () => {
    const mine = startRun(rec({ state: 'running', executions: 1, executionId: 'e0' }), job, now, 'e1');
    expect(mine).toMatchObject({ executions: 2, executionId: 'e1' });
    expect(startRun(mine, job, now, 'e1')).toBeUndefined();
  });
  it('a missing record is created from the job', () => {
    expect(startRun(undefined, job, now, 'e1')).toMatchObject({
      runId: 'r1',
      state: 'running',
      executions: 1,
    });
  });
  it('a cancel requested while queued or running ends cancelled without starting', () => {
    expect(startRun(rec({ cancelRequested: true }), job, now, 'e1')?.state).toBe('cancelled');
    expect(
      startRun(rec({ state: 'running', cancelRequested: true, executions: 1 }), job, now, 'e1'),
    ).toMatchObject({
      state: 'cancelled',
      executions: 1,
    });
  });
  it.each(['success', 'failure', 'timeout', 'cancelled'] as const)('%s is left alone', (state) => {
    expect(startRun(rec({ state }), job, now, 'e1')).toBeUndefined();
  });
});

describe('finishRun', () => {
  it('records status and error; never overwrites a terminal record', () => {
    const running = rec({ state: 'running', executions: 1 });
    expect(
      finishRun(running, job, { state: 'success', status: 200, body: Buffer.from('{}'), size: 2 }, now),
    ).toMatchObject({
      state: 'success',
      responseStatus: 200,
      finishedAt: now.toISOString(),
    });
    expect(
      finishRun(running, job, { state: 'timeout', error: { code: 'timeout', message: 'm' } }, now),
    ).toMatchObject({ state: 'timeout', error: { code: 'timeout' } });
    expect(finishRun(rec({ state: 'cancelled' }), job, { state: 'cancelled' }, now)).toBeUndefined();
  });
});

describe('graceMs', () => {
  it.each([
    [900, 900_000],
    [0, 1_000],
    [100_000, 43_200_000],
    [Number.NaN, 900_000],
  ])('%s s → %s ms', (s, ms) => {
    expect(graceMs({ ...job, gracePeriodSeconds: s })).toBe(ms);
  });
});

describe('the webhook of a finished run', () => {
  const body = Buffer.from('{"ok":true}');
  const finished = (over: Partial<RunRecord>) =>
    rec({ state: 'success', finishedAt: now.toISOString(), executions: 1, ...over });
  const answered = (kept: 'complete' | 'truncated' | 'dropped', size = body.length) =>
    finished({
      responseStatus: 200,
      result: {
        kept,
        contentType: 'application/json',
        sizeBytes: size,
        keptBytes: kept === 'complete' ? size : 0,
      },
    });

  it('carries the app answer the record names: from the kept result when whole, else from the stored body', () => {
    expect(webhookBodySource(answered('complete'), 1024)).toEqual({ from: 'result', size: body.length });
    expect(webhookBodySource(answered('truncated', 900), 1024)).toEqual({ from: 'stored', size: 900 });
    expect(webhookBodySource(answered('dropped', 900), 1024)).toEqual({ from: 'stored', size: 900 });
    expect(webhookBodySource(answered('dropped', 2048), 1024)).toEqual({ from: 'too_large', size: 2048 });
    const j = webhookJobFor(answered('complete'), job, body);
    expect(j).toMatchObject({
      requestId: 'r1',
      target: job.webhook,
      runStatus: 'success',
      completedAt: now.toISOString(),
      response: { status: 200, contentType: 'application/json', bodyBase64: body.toString('base64') },
    });
    expect(webhookJobSize(answered('complete'), job, body.length)).toBe(Buffer.byteLength(JSON.stringify(j)));
  });

  it('says what went wrong when the app gave no answer (504 timeout, 502 otherwise), nothing for cancelled', () => {
    const timeout = finished({ state: 'timeout', error: { code: 'timeout', message: 'm' } });
    expect(webhookJobFor(timeout, job, Buffer.alloc(0))?.response.status).toBe(504);
    const exhausted = finished({
      state: 'failure',
      error: { code: 'redelivery_exhausted', message: 'm' },
    });
    const src = webhookBodySource(exhausted, 1024);
    expect(src).toMatchObject({ from: 'error', status: 502 });
    const j = webhookJobFor(exhausted, job, src.from === 'error' ? src.body : Buffer.alloc(0));
    expect(j?.runStatus).toBe('failure');
    expect(JSON.parse(Buffer.from(j?.response.bodyBase64 ?? '', 'base64').toString())).toEqual({
      error: { code: 'redelivery_exhausted', message: 'm' },
    });
    expect(webhookBodySource(finished({ state: 'cancelled' }), 1024)).toEqual({ from: 'none' });
    expect(webhookBodySource(rec({ state: 'running' }), 1024)).toEqual({ from: 'none' });
    expect(webhookJobFor(answered('complete'), { ...job, webhook: undefined }, body)).toBeUndefined();
  });
});

describe('keepResult', () => {
  const json = (n: number) => Buffer.from(JSON.stringify({ s: 'x'.repeat(n) }));

  it('keeps a response within the bound whole, with its content type and size', () => {
    const body = json(100);
    expect(keepResult({ contentType: 'application/json', body, size: body.length }, 1024)).toEqual({
      result: {
        kept: 'complete',
        contentType: 'application/json',
        sizeBytes: body.length,
        keptBytes: body.length,
      },
      bytes: body,
    });
  });

  it('a response of exactly the bound is complete; one byte more is not', () => {
    const body = Buffer.alloc(64, 'a');
    expect(keepResult({ contentType: 'text/plain', body, size: 64 }, 64).result.kept).toBe('complete');
    const more = Buffer.alloc(65, 'a');
    expect(keepResult({ contentType: 'text/plain', body: more, size: 65 }, 64).result).toMatchObject({
      kept: 'truncated',
      sizeBytes: 65,
      keptBytes: 64,
    });
  });

  it('marks a text response over the bound truncated, cut at a character boundary, and knows its full size', () => {
    // "é" is 2 bytes: a cut after byte 5 of "aaaaé…" would split it.
    const body = Buffer.from(`aaaa${'é'.repeat(10)}`);
    const kept = keepResult({ contentType: 'text/plain; charset=utf-8', body, size: 5000 }, 5);
    expect(kept.result).toEqual({
      kept: 'truncated',
      contentType: 'text/plain; charset=utf-8',
      sizeBytes: 5000,
      keptBytes: 4,
    });
    expect(kept.bytes?.toString('utf8')).toBe('aaaa');
  });

  it('drops a binary response over the bound, saying why', () => {
    const r = keepResult({ contentType: 'image/png', body: Buffer.alloc(10), size: 10 }, 5);
    expect(r.bytes).toBeUndefined();
    expect(r.result).toMatchObject({ kept: 'dropped', sizeBytes: 10, keptBytes: 0 });
    expect(r.result.reason).toMatch(/larger than the 5 bytes/);
  });

  it('treats a body read only in part (size larger than what was read) as over the bound', () => {
    const r = keepResult({ contentType: 'application/json', body: Buffer.from('{"a":'), size: 10 }, 100);
    expect(r.result.kept).toBe('truncated');
  });

  it.each([
    ['application/json', true],
    ['application/problem+json', true],
    ['text/event-stream', true],
    ['TEXT/HTML; charset=utf-8', true],
    ['application/octet-stream', false],
    [undefined, false],
  ])('isTextual(%s) = %s', (t, want) => expect(isTextual(t)).toBe(want));

  it('utf8Prefix never splits a multi-byte character', () => {
    const b = Buffer.from('€€'); // 3 bytes each
    expect([1, 2, 3, 4, 5, 6].map((n) => utf8Prefix(b, n))).toEqual([0, 0, 3, 3, 3, 6]);
  });
});

describe('finishRun with a result', () => {
  it('records the result metadata, and a text/event-stream response as streamed', () => {
    const running = rec({ state: 'running', executions: 1 });
    const outcome = { state: 'success' as const, status: 200, body: Buffer.from('data: 1\n\n'), size: 9 };
    const sse = {
      kept: 'complete' as const,
      contentType: 'text/event-stream; charset=utf-8',
      sizeBytes: 9,
      keptBytes: 9,
    };
    expect(finishRun(running, job, outcome, now, sse)).toMatchObject({ result: sse, streamed: true });
    const plain = { ...sse, contentType: 'application/json' };
    expect(finishRun(running, job, outcome, now, plain)?.streamed).toBeUndefined();
  });
});
