import { describe, expect, it } from 'vitest';
import { systemClock } from '../../shared/clock.ts';
import type { Lease } from '../../shared/kube/objects.ts';
import { createFakeKubeClient } from '../../shared/kube/testing/fake-kube-client.ts';
import { silentLogger } from '../../shared/log.ts';
import { waitUntil } from '../../shared/testing/wait.ts';
import { createLeaderElector, type LeaderElectionSettings, microTime } from './leader-election.ts';

const settings = (identity: string, releaseOnStop = true): LeaderElectionSettings => ({
  namespace: 'ns',
  leaseName: 'op',
  identity,
  leaseDurationMs: 1_000,
  renewDeadlineMs: 600,
  retryPeriodMs: 50,
  releaseOnStop,
});

describe('leader election', () => {
  it('one leader at a time; the other takes over after the lease expires', async () => {
    const client = createFakeKubeClient();
    const log: string[] = [];
    const elector = (id: string, release: boolean) =>
      createLeaderElector({
        client,
        settings: settings(id, release),
        clock: systemClock,
        log: silentLogger(),
        onStartedLeading: () => {
          log.push(`${id} start`);
        },
        onStoppedLeading: () => {
          log.push(`${id} stop`);
        },
      });
    const a = elector('a', false);
    const b = elector('b', true);
    a.start();
    await waitUntil(() => a.isLeader(), 10_000);
    b.start();
    await new Promise((r) => setTimeout(r, 300));
    expect(b.isLeader()).toBe(false);
    await a.stop();
    expect(a.isLeader()).toBe(false);
    await waitUntil(() => b.isLeader(), 10_000);
    await b.stop();
    expect(log).toEqual(['a start', 'a stop', 'b start', 'b stop']);
    const lease: Lease | undefined = client.stored(
      { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', plural: 'leases', namespaced: true },
      {
        namespace: 'ns',
        name: 'op',
      },
    );
    // b released it on stop.
    expect(lease?.spec?.holderIdentity).toBe('');
    expect(lease?.spec?.leaseTransitions).toBe(1);
  });

  it('a leader that cannot renew steps down', async () => {
    const client = createFakeKubeClient();
    let leading = false;
    const e = createLeaderElector({
      client,
      settings: settings('a'),
      clock: systemClock,
      log: silentLogger(),
      onStartedLeading: () => {
        leading = true;
      },
      onStoppedLeading: () => {
        leading = false;
      },
    });
    e.start();
    await waitUntil(() => leading, 10_000);
    client.failOn('update', 'leases', 500);
    await waitUntil(() => !leading, 10_000);
    expect(e.isLeader()).toBe(false);
    await e.stop();
  });

  it('MicroTime has microseconds', () => {
    expect(microTime(Date.parse('2026-01-01T00:00:00.123Z'))).toBe('2026-01-01T00:00:00.123000Z');
  });
});
