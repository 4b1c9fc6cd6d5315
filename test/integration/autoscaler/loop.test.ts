/**
 * The autoscaler loop and the gateway's load reporter over a real NATS server (with JetStream for the
 * queued-run count): a call held at zero wakes its app at once (not at the next tick), reports from
 * two gateways add up, a gateway that stops reporting stops counting, queued async runs count, a
 * steady load makes no scale calls, and a gateway pod's data plane reports beside Node as `<reporter>-dp`.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { effectiveScaling } from '../../../src/apis/v1alpha1/scaling.ts';
import { DEFAULT_AUTOSCALER_SETTINGS } from '../../../src/autoscaler/autoscaler.ts';
import { type AutoscaledApp, createAutoscalerLoop } from '../../../src/autoscaler/loop.ts';
import { createBalancer, DEFAULT_BALANCER_SETTINGS } from '../../../src/gateway/balancer/balancer.ts';
import { createLoadReporter } from '../../../src/gateway/balancer/reporter.ts';
import { ensureRunsStream } from '../../../src/runs/infrastructure.ts';
import { runSubject } from '../../../src/shared/contracts/messaging.ts';
import { loadSubject } from '../../../src/shared/contracts/scaling.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { waitFor } from '../../harness/process.ts';
import { FAST_AUTOSCALER_SETTINGS } from './fast-settings.ts';

let nats: NatsServer;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
});

afterAll(async () => {
  await nc?.close();
  await nats?.stop();
});

/** A fake fleet: scale() records the decision and makes it the app's desired count. */
function fleet(apps: AutoscaledApp[]) {
  const calls: Array<[string, number, string]> = [];
  return {
    calls,
    apps: () => apps,
    app: (key: string) => apps.find((a) => a.key === key),
    async scale(app: AutoscaledApp, d: { replicas: number; reason: string }) {
      calls.push([app.key, d.replicas, d.reason]);
      app.desiredReplicas = d.replicas;
      app.readyReplicas = d.replicas;
    },
  };
}

const scaling = effectiveScaling({
  minReplicas: 0,
  maxReplicas: 5,
  replicaConcurrency: 1,
  targetUtilization: 100,
  cooldownSeconds: 0,
});

describe('autoscaler loop over NATS', () => {
  it('a call held at zero wakes the app before any tick', async () => {
    const f = fleet([{ key: 'p/cold', scaling, readyReplicas: 0, desiredReplicas: 0 }]);
    const loop = createAutoscalerLoop({
      nc,
      log: silentLogger(),
      settings: { ...DEFAULT_AUTOSCALER_SETTINGS, tickMs: 600_000, runsCountTimeoutMs: 2_000 },
      ...f,
      active: () => true,
    });
    await loop.start();
    const reporter = createLoadReporter({ nc, log: silentLogger(), intervalMs: 60_000 });
    const balancer = createBalancer(DEFAULT_BALANCER_SETTINGS, { onWake: reporter.wake });
    const held = balancer
      .pool('p', 'cold', scaling)
      .acquire()
      .catch(() => undefined);
    await waitFor('woken', async () => f.calls.length > 0, 10_000);
    expect(f.calls).toEqual([['p/cold', 1, 'Load']]);
    balancer.close(new Error('done'));
    await held;
    await loop.stop();
  });

  it('sums two gateways, counts queued runs, forgets a silent gateway, and is quiet when steady', async () => {
    const f = fleet([{ key: 'p/busy', scaling, readyReplicas: 1, desiredReplicas: 1 }]);
    const settings = FAST_AUTOSCALER_SETTINGS;
    const loop = createAutoscalerLoop({ nc, log: silentLogger(), settings, ...f, active: () => true });
    await loop.start();
    const gw = [0, 1].map(() => {
      const reporter = createLoadReporter({ nc, log: silentLogger(), intervalMs: 100 });
      const balancer = createBalancer(DEFAULT_BALANCER_SETTINGS);
      balancer.setReplicas('p', 'busy', [{ id: 'r', url: 'http://r.invalid' }]);
      reporter.start(balancer);
      return { reporter, balancer };
    });
    // One call in flight on each gateway: 2 replicas wanted.
    const leases = await Promise.all(gw.map((g) => g.balancer.pool('p', 'busy', scaling).acquire()));
    await waitFor('scaled to 2', async () => f.apps()[0]?.desiredReplicas === 2, 10_000);

    // Three async runs queued in JetStream for the app: 2 calls + 3 runs = 5.
    const jsm = await jetstreamManager(nc);
    await ensureRunsStream(jsm);
    const js = jetstream(nc);
    for (let i = 0; i < 3; i++) await js.publish(runSubject('p', 'busy'), '{}', { msgID: `run-${i}` });
    await waitFor('scaled to 5', async () => f.apps()[0]?.desiredReplicas === 5, 10_000);
    await jsm.streams.purge('RUNS');
    await waitFor('back to 2', async () => f.apps()[0]?.desiredReplicas === 2, 10_000);

    // Steady: no scale calls for a while.
    const before = f.calls.length;
    await new Promise((r) => setTimeout(r, 1_500));
    expect(f.calls.length).toBe(before);

    // The second gateway dies (stops reporting) with its call: after the ttl it no longer counts.
    gw[1]?.reporter.stop();
    await waitFor('down to 1', async () => f.apps()[0]?.desiredReplicas === 1, 10_000);

    for (const l of leases) l.release();
    for (const g of gw) g.reporter.stop();
    await loop.stop();
  });

  it("sums a gateway pod's two reporters (Node's and its data plane's <reporter>-dp), each forgotten on its own", async () => {
    const f = fleet([{ key: 'p/pod', scaling, readyReplicas: 1, desiredReplicas: 1 }]);
    const settings = FAST_AUTOSCALER_SETTINGS;
    const loop = createAutoscalerLoop({ nc, log: silentLogger(), settings, ...f, active: () => true });
    await loop.start();
    // One gateway process: its balancer holds one call (Node's own report) and its data plane reports
    // two more through the same reporter's publish.
    const reporter = createLoadReporter({ nc, log: silentLogger(), intervalMs: 100 });
    const balancer = createBalancer(DEFAULT_BALANCER_SETTINGS);
    balancer.setReplicas('p', 'pod', [{ id: 'r', url: 'http://r.invalid' }]);
    reporter.start(balancer);
    const lease = await balancer.pool('p', 'pod', scaling).acquire();
    const dpLoad = { projectId: 'p', appName: 'pod', concurrency: 2, inflight: 2, queued: 0, runs: 0 };
    const dp = setInterval(() => reporter.publish([dpLoad]), 100);
    try {
      await waitFor('scaled to 3 (1 + 2)', async () => f.apps()[0]?.desiredReplicas === 3, 10_000);
      // The data plane goes silent (it died): after the ttl only Node's call counts.
      clearInterval(dp);
      await waitFor('down to 1', async () => f.apps()[0]?.desiredReplicas === 1, 10_000);
      // Node's call ends, the data plane's come back: the data plane's alone count.
      lease.release();
      const again = setInterval(() => reporter.publish([dpLoad]), 100);
      try {
        await waitFor('back to 2', async () => f.apps()[0]?.desiredReplicas === 2, 10_000);
      } finally {
        clearInterval(again);
      }
      // Nothing is published for the data plane after stop.
      reporter.stop();
      const seen: string[] = [];
      const sub = nc.subscribe(loadSubject(`${reporter.reporter}-dp`), {
        callback: (_, m) => void seen.push(m.string()),
      });
      await nc.flush();
      reporter.publish([dpLoad]);
      await nc.flush();
      sub.unsubscribe();
      expect(seen).toEqual([]);
    } finally {
      clearInterval(dp);
      reporter.stop();
      await loop.stop();
    }
  });

  it('a non-leader listens but never scales', async () => {
    const f = fleet([{ key: 'p/follower', scaling, readyReplicas: 0, desiredReplicas: 0 }]);
    const loop = createAutoscalerLoop({
      nc,
      log: silentLogger(),
      settings: { ...DEFAULT_AUTOSCALER_SETTINGS, tickMs: 100, runsCountTimeoutMs: 2_000 },
      ...f,
      active: () => false,
    });
    await loop.start();
    const reporter = createLoadReporter({ nc, log: silentLogger(), intervalMs: 60_000 });
    reporter.wake('p', 'follower', {
      projectId: 'p',
      appName: 'follower',
      concurrency: 1,
      inflight: 0,
      queued: 1,
      runs: 0,
    });
    await new Promise((r) => setTimeout(r, 500));
    expect(f.calls).toEqual([]);
    await loop.stop();
  });
});
