import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ApiError } from '../../shared/errors.ts';
import { DEFAULT_BALANCER_SETTINGS } from './balancer.ts';
import { type Attempt, placeCall, Refusal } from './place.ts';
import { AppPool } from './pool.ts';

const s = { ...DEFAULT_BALANCER_SETTINGS, maxRetries: 2, queueTimeoutMs: 1_000, capacityBlockMs: 100 };
const pool = (...ids: string[]) => {
  const p = new AppPool('p/a', {
    capacity: 1,
    maxQueue: 10,
    queueTimeoutMs: s.queueTimeoutMs,
    coldStartTimeoutMs: 5_000,
    retryAfterSeconds: 5,
  });
  p.setReplicas(ids.map((id) => ({ id, url: `http://${id}` })));
  return p;
};

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('placeCall', () => {
  it('keeps the slot of the replica that took the call until the caller releases it', async () => {
    const p = pool('r1');
    const { value, lease } = await placeCall(p, s, async (l) => ({ value: l.replica.id }));
    expect([value, p.inflight]).toEqual(['r1', 1]);
    lease.release();
    expect(p.inflight).toBe(0);
  });

  it('a replica shutting down: the call goes to another replica, the caller sees only that answer', async () => {
    const p = pool('r1', 'r2');
    const tried: string[] = [];
    const { value } = await placeCall(p, s, async (l): Promise<Attempt<string>> => {
      tried.push(l.replica.id);
      return l.replica.id === 'r1' ? { refused: Refusal.ShuttingDown } : { value: 'ok' };
    });
    expect([tried, value, p.refusals]).toEqual([['r1', 'r2'], 'ok', 1]);
  });

  it('refused connections everywhere: maxRetries retries, then 502 upstream_unreachable, no slot left held', async () => {
    const p = pool('r1', 'r2', 'r3');
    let tries = 0;
    const err = await placeCall(p, s, async () => {
      tries++;
      return { refused: Refusal.Unreachable, detail: 'ECONNREFUSED' };
    }).catch((e: unknown) => e as ApiError);
    expect(err).toBeInstanceOf(ApiError);
    expect([tries, (err as ApiError).status, (err as ApiError).code, (err as ApiError).details]).toEqual([
      3,
      502,
      'upstream_unreachable',
      { reason: 'unreachable', detail: 'ECONNREFUSED' },
    ]);
    expect(p.inflight).toBe(0);
  });

  it('"at capacity" refusals are retried (not counted) until a slot opens or the queue bound passes', async () => {
    const p = pool('r1');
    let tries = 0;
    const placed = placeCall(p, s, async () => {
      tries++;
      return tries < 5 ? { refused: Refusal.AtCapacity } : { value: 'ran' };
    });
    await vi.advanceTimersByTimeAsync(1_000);
    expect((await placed).value).toBe('ran');
    expect(tries).toBe(5);

    const never = placeCall(p, s, async () => ({ refused: Refusal.AtCapacity })).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(await never).toMatchObject({ status: 503, code: 'queue_timeout' });
  });

  it('an attempt that throws gives its slot back and the error through', async () => {
    const p = pool('r1');
    await expect(
      placeCall(p, s, async () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(p.inflight).toBe(0);
  });
});
