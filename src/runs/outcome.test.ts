import { describe, expect, it } from 'vitest';
import type { RunJob, RunRecord } from '../shared/contracts/messaging.ts';
import { finishRun, graceMs, queuedRecordFor, startRun, webhookResponse } from './outcome.ts';

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
    expect(startRun(rec({}), job, now)).toMatchObject({
      state: 'running',
      executions: 1,
      startedAt: now.toISOString(),
    });
  });
  it('a redelivered running run starts again and counts the execution', () => {
    expect(startRun(rec({ state: 'running', executions: 1 }), job, now)).toMatchObject({
      state: 'running',
      executions: 2,
    });
  });
  it('a missing record is created from the job', () => {
    expect(startRun(undefined, job, now)).toMatchObject({ runId: 'r1', state: 'running', executions: 1 });
  });
  it('a cancel requested while queued or running ends cancelled without starting', () => {
    expect(startRun(rec({ cancelRequested: true }), job, now)?.state).toBe('cancelled');
    expect(startRun(rec({ state: 'running', cancelRequested: true, executions: 1 }), job, now)).toMatchObject(
      {
        state: 'cancelled',
        executions: 1,
      },
    );
  });
  it.each(['success', 'failure', 'timeout', 'cancelled'] as const)('%s is left alone', (state) => {
    expect(startRun(rec({ state }), job, now)).toBeUndefined();
  });
});

describe('finishRun', () => {
  it('records status and error; never overwrites a terminal record', () => {
    const running = rec({ state: 'running', executions: 1 });
    expect(
      finishRun(running, job, { state: 'success', status: 200, body: Buffer.from('{}') }, now),
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

describe('webhookResponse', () => {
  it('forwards the app response, synthesises one for timeout/unreachable, nothing for cancelled', () => {
    expect(
      webhookResponse({
        state: 'failure',
        status: 500,
        contentType: 'application/json',
        body: Buffer.from('x'),
      }),
    ).toMatchObject({ status: 500, runStatus: 'failure' });
    expect(webhookResponse({ state: 'timeout', error: { code: 'timeout', message: 'm' } })).toMatchObject({
      status: 504,
      runStatus: 'timeout',
    });
    expect(
      webhookResponse({ state: 'failure', error: { code: 'upstream_unreachable', message: 'm' } }),
    ).toMatchObject({ status: 502, runStatus: 'failure' });
    expect(webhookResponse({ state: 'cancelled' })).toBeUndefined();
  });
});
