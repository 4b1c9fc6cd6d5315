import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { effectiveScaling } from '../../apis/v1alpha1/scaling.ts';
import { createBalancer, DEFAULT_BALANCER_SETTINGS, poolSettingsFor } from './balancer.ts';

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('poolSettingsFor', () => {
  it.each([
    ['10 × concurrency × maxReplicas', { replicaConcurrency: 1, maxReplicas: 3 }, 1, 30],
    ['capped per app', { replicaConcurrency: 100, maxReplicas: 10 }, 100, 1_000],
  ])('%s', (_n, scaling, capacity, maxQueue) => {
    expect(poolSettingsFor(effectiveScaling(scaling), DEFAULT_BALANCER_SETTINGS)).toMatchObject({
      capacity,
      maxQueue,
    });
  });
});

describe('Balancer', () => {
  const one = effectiveScaling({ replicaConcurrency: 1, maxReplicas: 1 });

  it('replicas known before the first call are used by it', async () => {
    const b = createBalancer(DEFAULT_BALANCER_SETTINGS);
    b.setReplicas('p', 'a', [{ id: 'r1', url: 'http://r1' }]);
    expect((await b.pool('p', 'a', one).acquire()).replica.id).toBe('r1');
  });

  it('a call held at zero wakes the app with its load', async () => {
    const onWake = vi.fn();
    const b = createBalancer(DEFAULT_BALANCER_SETTINGS, { onWake });
    void b
      .pool('p', 'a', one)
      .acquire()
      .catch(() => {});
    expect(onWake).toHaveBeenCalledWith('p', 'a', expect.objectContaining({ queued: 1, inflight: 0 }));
    b.close(new Error('stop'));
  });

  it('reports busy apps, once more when they go quiet, then nothing', async () => {
    const b = createBalancer(DEFAULT_BALANCER_SETTINGS);
    b.setReplicas('p', 'a', [{ id: 'r1', url: 'http://r1' }]);
    const lease = await b.pool('p', 'a', one).acquire();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(b.loads((_p, app) => (app === 'a' ? 2 : 0))).toEqual([
      { projectId: 'p', appName: 'a', concurrency: 1, inflight: 1, queued: 0, runs: 2, replicas: { r1: 1 } },
    ]);
    lease.release();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(b.loads().map((l) => [l.appName, l.concurrency])).toEqual([['a', 0]]);
    expect(b.loads()).toEqual([]);
  });

  it('applies a changed replicaConcurrency to the existing pool', async () => {
    const b = createBalancer(DEFAULT_BALANCER_SETTINGS);
    expect(b.pool('p', 'a', one).settings.capacity).toBe(1);
    expect(b.pool('p', 'a', effectiveScaling({ replicaConcurrency: 4 })).settings.capacity).toBe(4);
  });
});
