import { describe, expect, it } from 'vitest';
import type { AppLoad, LoadReport } from '../shared/contracts/scaling.ts';
import { LoadAggregator, observedConcurrency } from './load-aggregator.ts';

const load = (appName: string, over: Partial<AppLoad> = {}): AppLoad => ({
  projectId: 'p',
  appName,
  concurrency: 0,
  inflight: 0,
  queued: 0,
  runs: 0,
  ...over,
});
const report = (reporter: string, apps: AppLoad[]): LoadReport => ({
  v: 1,
  reporter,
  intervalMs: 1000,
  apps,
});

describe('LoadAggregator', () => {
  it('sums the latest report of each reporter per app', () => {
    const a = new LoadAggregator(3_000);
    a.record(report('gw-1', [load('a', { concurrency: 2, inflight: 2, replicas: { r1: 2 } })]), 0);
    a.record(report('gw-1', [load('a', { concurrency: 3, inflight: 3, replicas: { r1: 3 } })]), 1_000);
    a.record(report('gw-2', [load('a', { concurrency: 1.5, queued: 1, replicas: { r1: 1, r2: 0 } })]), 1_000);
    expect(a.totals('p/a', 1_500)).toEqual({
      concurrency: 4.5,
      inflight: 3,
      queued: 1,
      runs: 0,
      replicas: { r1: 4, r2: 0 },
      reporters: 2,
    });
  });

  it('an app left out of a reporter’s newer report has no load from it', () => {
    const a = new LoadAggregator(3_000);
    a.record(report('gw-1', [load('a', { concurrency: 2 }), load('b', { concurrency: 1 })]), 0);
    a.record(report('gw-1', [load('b', { concurrency: 1 })]), 1_000);
    expect(a.totals('p/a', 1_000).concurrency).toBe(0);
    expect(a.totals('p/b', 1_000).concurrency).toBe(1);
  });

  it('a reporter silent for the ttl stops counting, even before expire() runs, and expire() drops it', () => {
    const a = new LoadAggregator(3_000);
    a.record(report('dead', [load('a', { concurrency: 10, inflight: 10 })]), 0);
    a.record(report('live', [load('a', { concurrency: 1, inflight: 1 })]), 2_500);
    expect(a.totals('p/a', 2_999).concurrency).toBe(11);
    expect(a.totals('p/a', 3_000).concurrency).toBe(1);
    expect(a.expire(3_000)).toEqual(['dead']);
    expect(a.reporters).toBe(1);
  });

  it('a wake request updates one app and keeps the reporter’s other apps', () => {
    const a = new LoadAggregator(3_000);
    a.record(report('gw-1', [load('b', { concurrency: 1 })]), 0);
    a.recordApp('gw-1', load('a', { queued: 1 }), 500);
    expect(a.totals('p/a', 500).queued).toBe(1);
    expect(a.totals('p/b', 500).concurrency).toBe(1);
  });
});

describe('observedConcurrency', () => {
  const totals = (over: Partial<ReturnType<LoadAggregator['totals']>>) => ({
    concurrency: 0,
    inflight: 0,
    queued: 0,
    runs: 0,
    replicas: {},
    reporters: 1,
    ...over,
  });
  it.each([
    ['calls only', totals({ concurrency: 2.5, inflight: 2 }), 0, 2.5],
    [
      'a burst that just arrived is not averaged away',
      totals({ concurrency: 0.5, inflight: 4, queued: 2 }),
      0,
      6,
    ],
    ['runs in the stream that no worker holds count', totals({ concurrency: 1, inflight: 1, runs: 1 }), 5, 5],
    ['runs held by workers are not counted twice', totals({ concurrency: 2, inflight: 2, runs: 2 }), 2, 2],
    ['an app at zero with queued runs only', totals({}), 3, 3],
  ])('%s', (_name, t, stream, want) => {
    expect(observedConcurrency(t, stream)).toBe(want);
  });
});
