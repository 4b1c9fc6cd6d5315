import { describe, expect, it } from 'vitest';
import { backoffDelay } from '../../shared/backoff.ts';
import { createWorkQueue } from './workqueue.ts';

const backoff = { baseDelayMs: 10, maxDelayMs: 80 };

describe('work queue', () => {
  it('dedupes queued keys and hands them out in order', async () => {
    const q = createWorkQueue({ backoff });
    q.add('a');
    q.add('b');
    q.add('a');
    expect(q.length()).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
  });

  it('never hands out a key twice at once; a re-add while busy comes back after done', async () => {
    const q = createWorkQueue({ backoff });
    q.add('a');
    const k = await q.get();
    q.add('a');
    expect(q.length()).toBe(0);
    q.done(k!);
    expect(q.length()).toBe(1);
    expect(await q.get()).toBe('a');
  });

  it('wakes a waiting worker', async () => {
    const q = createWorkQueue({ backoff });
    const next = q.get();
    q.add('x');
    expect(await next).toBe('x');
  });

  it('retries a failing key with growing backoff without blocking others', async () => {
    const q = createWorkQueue({ backoff });
    q.add('bad');
    q.add('good');
    const bad = await q.get();
    q.done(bad!);
    q.addRateLimited(bad!);
    q.addRateLimited(bad!);
    expect(q.failures('bad')).toBe(2);
    expect(await q.get()).toBe('good');
    expect(await q.get()).toBe('bad');
    q.forget('bad');
    expect(q.failures('bad')).toBe(0);
  });

  it('backoff doubles up to the cap', () => {
    expect([1, 2, 3, 4, 5].map((n) => backoffDelay(n, backoff))).toEqual([10, 20, 40, 80, 80]);
  });

  it('shutDown releases waiting workers', async () => {
    const q = createWorkQueue({ backoff });
    const next = q.get();
    q.shutDown();
    expect(await next).toBeUndefined();
  });
});
