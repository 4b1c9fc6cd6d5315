import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ApiError } from '../../shared/errors.ts';
import { AppPool, type Lease, type PoolSettings } from './pool.ts';

const settings = (over: Partial<PoolSettings> = {}): PoolSettings => ({
  capacity: 1,
  maxQueue: 10,
  queueTimeoutMs: 1_000,
  coldStartTimeoutMs: 5_000,
  retryAfterSeconds: 2,
  ...over,
});
const replicas = (...ids: string[]) => ids.map((id) => ({ id, url: `http://${id}` }));

/** Settles the microtasks a granted waiter needs, then reports which promises have settled. */
async function settled<T>(ps: Promise<T>[]): Promise<boolean[]> {
  const done = ps.map(() => false);
  for (const [i, p] of ps.entries()) {
    p.then(
      () => {
        done[i] = true;
      },
      () => {
        done[i] = true;
      },
    );
  }
  await vi.advanceTimersByTimeAsync(0);
  return done;
}

async function rejection(p: Promise<unknown>): Promise<ApiError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('AppPool placement', () => {
  it('sends each call to the least-loaded replica, never more than capacity per replica', async () => {
    const pool = new AppPool('p/a', settings({ capacity: 2 }));
    pool.setReplicas(replicas('r1', 'r2'));
    const leases: Lease[] = [];
    for (let i = 0; i < 4; i++) leases.push(await pool.acquire());
    expect(leases.map((l) => l.replica.id).sort()).toEqual(['r1', 'r1', 'r2', 'r2']);
    expect(pool.snapshot().replicas).toEqual({ r1: 2, r2: 2 });
    const fifth = pool.acquire();
    expect(await settled([fifth])).toEqual([false]);
    expect(pool.queued).toBe(1);
    leases[0]?.release();
    expect((await fifth).replica.id).toBe(leases[0]?.replica.id);
  });

  it('tryAcquire takes a free slot at once, and none while the replicas are full or a call waits', async () => {
    const pool = new AppPool('p/a', settings());
    expect(pool.tryAcquire()).toBeUndefined(); // no replica yet
    pool.setReplicas(replicas('r1', 'r2'));
    const a = pool.tryAcquire();
    const b = pool.tryAcquire();
    expect([a?.replica.id, b?.replica.id].sort()).toEqual(['r1', 'r2']);
    expect(pool.tryAcquire()).toBeUndefined(); // both full
    const waiting = pool.acquire();
    a?.release(); // goes to the waiting call, not to a later tryAcquire
    expect(pool.tryAcquire()).toBeUndefined();
    expect((await waiting).replica.id).toBe(a?.replica.id);
    expect(pool.snapshot().inflight).toBe(2);
  });

  it('waiting calls are served first in, first out', async () => {
    const pool = new AppPool('p/a', settings());
    pool.setReplicas(replicas('r1'));
    const first = await pool.acquire();
    const order: number[] = [];
    const waiting = [1, 2, 3].map((n) =>
      pool.acquire().then((l) => {
        order.push(n);
        return l;
      }),
    );
    first.release();
    (await waiting[0])?.release();
    (await waiting[1])?.release();
    await waiting[2];
    expect(order).toEqual([1, 2, 3]);
  });

  it('a release twice frees one slot only', async () => {
    const pool = new AppPool('p/a', settings({ capacity: 2 }));
    pool.setReplicas(replicas('r1'));
    const a = await pool.acquire();
    await pool.acquire();
    a.release();
    a.release();
    expect(pool.inflight).toBe(1);
  });
});

describe('AppPool bounds', () => {
  it('refuses a call at once when the queue is full (503 queue_full with Retry-After)', async () => {
    const pool = new AppPool('p/a', settings({ maxQueue: 1 }));
    pool.setReplicas(replicas('r1'));
    await pool.acquire();
    void pool.acquire().catch(() => {});
    const err = await rejection(pool.acquire());
    expect([err.status, err.code, err.retryAfter]).toEqual([503, 'queue_full', 2]);
  });

  it('a waiting call gives up after the queue wait bound (503 queue_timeout)', async () => {
    const pool = new AppPool('p/a', settings());
    pool.setReplicas(replicas('r1'));
    await pool.acquire();
    const waiting = rejection(pool.acquire());
    await vi.advanceTimersByTimeAsync(999);
    expect(pool.queued).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    const err = await waiting;
    expect([err.code, err.message]).toEqual([
      'queue_timeout',
      'no replica of app "p/a" had a free slot within 1 s; retry later',
    ]);
    expect(pool.queued).toBe(0);
  });

  it('a requeued call that times out names the queue wait bound, not the time it had left', async () => {
    // A call handed over by the native data plane (or refused by a replica) comes back with the deadline
    // it was given queueTimeoutMs after it first waited: here 50 ms are left of the 1 s bound.
    const pool = new AppPool('p/a', settings());
    pool.setReplicas(replicas('r1'));
    await pool.acquire();
    const waiting = rejection(pool.acquire({ requeue: { deadline: Date.now() + 50 } }));
    await vi.advanceTimersByTimeAsync(50);
    const err = await waiting;
    expect([err.code, err.message]).toEqual([
      'queue_timeout',
      'no replica of app "p/a" had a free slot within 1 s; retry later',
    ]);
    // With no replica (handed over as the app's replicas went to zero): the cold start's words, same bound.
    pool.setReplicas([]);
    const cold = rejection(pool.acquire({ requeue: { deadline: Date.now() + 50 } }));
    await vi.advanceTimersByTimeAsync(50);
    expect((await cold).message).toBe('app "p/a" had no ready replica within 1 s; retry later');
  });

  it('a caller that goes away leaves the queue', async () => {
    const pool = new AppPool('p/a', settings());
    pool.setReplicas(replicas('r1'));
    const held = await pool.acquire();
    const ac = new AbortController();
    const waiting = pool.acquire({ signal: ac.signal });
    ac.abort(new Error('client went away'));
    await expect(waiting).rejects.toThrow('client went away');
    expect(pool.queued).toBe(0);
    held.release();
    expect(pool.inflight).toBe(0);
  });
});

describe('AppPool at zero replicas', () => {
  it('holds the call, asks for a replica at once, and sends it when one is ready', async () => {
    const onWake = vi.fn();
    const pool = new AppPool('p/a', settings(), { onWake });
    const held = pool.acquire();
    expect(onWake).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(3_000);
    pool.setReplicas(replicas('r1'));
    expect((await held).replica.id).toBe('r1');
  });

  it('gives up after the cold-start bound (503 cold_start_timeout)', async () => {
    const pool = new AppPool('p/a', settings());
    const held = rejection(pool.acquire());
    await vi.advanceTimersByTimeAsync(5_000);
    expect((await held).code).toBe('cold_start_timeout');
  });

  it('fails held and new calls at once when the app cannot start, naming the cause', async () => {
    const pool = new AppPool('p/a', settings());
    const held = rejection(pool.acquire());
    pool.setStartFailure({ reason: 'ImportError', message: 'main.py raised ModuleNotFoundError: no numpy' });
    const err = await held;
    expect([err.status, err.code, err.message, err.details]).toEqual([
      503,
      'app_start_failed',
      'app "p/a" cannot start: main.py raised ModuleNotFoundError: no numpy',
      { reason: 'ImportError' },
    ]);
    expect((await rejection(pool.acquire())).code).toBe('app_start_failed');
    // A replica that is ready serves, whatever the status says about the others.
    pool.setReplicas(replicas('r1'));
    expect((await pool.acquire()).replica.id).toBe('r1');
  });
});

describe('AppPool refusals (runtime backstop, shutting down, connection refused)', () => {
  it('skips a replica that refused for the block time; the call goes back to the head of the queue', async () => {
    const pool = new AppPool('p/a', settings({ capacity: 1 }));
    pool.setReplicas(replicas('r1', 'r2'));
    const first = await pool.acquire();
    const other = await pool.acquire();
    const queued = pool.acquire();
    // `first` was refused by its replica (another gateway filled it): retry, ahead of `queued`.
    first.refuse(200);
    const retry = pool.acquire({ requeue: { deadline: Date.now() + 1_000 } });
    // r1 is free but blocked; r2 frees up: the retried call gets it, not the one queued earlier.
    other.release();
    expect((await retry).replica.id).toBe('r2');
    expect(await settled([queued])).toEqual([false]);
    // Once the block ends, r1 takes the queued call without any other event.
    await vi.advanceTimersByTimeAsync(200);
    expect((await queued).replica.id).toBe('r1');
    expect(pool.refusals).toBe(1);
  });
});

describe('AppPool retries after a block', () => {
  it('a waiting call is placed when the block ends even if the clock passes it between the failed pick and the next look', async () => {
    // The pool's clock, ticking once per read from the moment the block is about to end.
    let t = 0;
    let ticking = false;
    const now = () => (ticking ? t++ : t);
    const pool = new AppPool('p/a', settings({ capacity: 1, queueTimeoutMs: 10_000 }), { now });
    pool.setReplicas(replicas('r1'));
    (await pool.acquire()).refuse(100);
    const retry = pool.acquire({ requeue: { deadline: 10_000 } });
    expect(await settled([retry])).toEqual([false]);
    // The unblock timer fires with the clock 1 ms short of the block's end (timers and the wall clock
    // differ by a tick): the pick fails at 99, the next look is at 100.
    t = 99;
    ticking = true;
    await vi.advanceTimersByTimeAsync(100);
    ticking = false;
    await vi.advanceTimersByTimeAsync(50);
    expect(await settled([retry])).toEqual([true]);
    expect((await retry).replica.id).toBe('r1');
  });
});

describe('AppPool replica changes', () => {
  it('a replica that leaves keeps its in-flight count if it comes back', async () => {
    const pool = new AppPool('p/a', settings({ capacity: 1 }));
    pool.setReplicas(replicas('r1'));
    const lease = await pool.acquire();
    pool.setReplicas([]);
    pool.setReplicas(replicas('r1'));
    const next = pool.acquire();
    expect(await settled([next])).toEqual([false]);
    lease.release();
    expect((await next).replica.id).toBe('r1');
  });

  it('a larger capacity lets waiting calls through at once', async () => {
    const pool = new AppPool('p/a', settings({ capacity: 1 }));
    pool.setReplicas(replicas('r1'));
    await pool.acquire();
    const waiting = pool.acquire();
    pool.configure(settings({ capacity: 2 }));
    expect((await waiting).replica.id).toBe('r1');
  });

  it('reports the time-averaged level of in-flight plus queued calls', async () => {
    const pool = new AppPool('p/a', settings({ capacity: 1 }));
    pool.setReplicas(replicas('r1'));
    pool.snapshot();
    const a = await pool.acquire();
    void pool.acquire();
    await vi.advanceTimersByTimeAsync(500);
    a.release();
    await vi.advanceTimersByTimeAsync(500);
    // 2 for 0.5 s, then 1 for 0.5 s.
    expect(pool.snapshot()).toMatchObject({ inflight: 1, queued: 0, concurrency: 1.5, replicas: { r1: 1 } });
  });
});
