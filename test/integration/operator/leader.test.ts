/**
 * Two operator instances on one Lease: only the leader writes; when it stops (cleanly, or by
 * vanishing without handing the Lease back) the other takes over and reconciles.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../../src/shared/kube/client.ts';
import { type KubeObject, type Lease, Resources } from '../../../src/shared/kube/objects.ts';
import { createTestNamespace, testKubeConfig } from '../../harness/kube.ts';
import { applyCrds, eventually, type TestOperator, testClient, testOperator } from './helpers.ts';

const kc = testKubeConfig();
let client: KubeClient;
let ns: string;
const running: TestOperator[] = [];

const start = async (identity: string, releaseOnStop = true) => {
  const o = testOperator(kc, ns, { leaderElection: { releaseOnStop } }, identity);
  running.push(o);
  await o.operator.start();
  return o;
};

const createApp = (name: string) =>
  client.create(Resources.App, {
    apiVersion: 'apphost.dev/v1alpha1',
    kind: 'App',
    metadata: { name, namespace: ns },
    spec: { runtime: 'cortex', image: `example.invalid/${name}:1` },
  });
const deployment = (name: string) => client.get<KubeObject>(Resources.Deployment, { namespace: ns, name });

beforeAll(async () => {
  await applyCrds();
  client = testClient(kc);
  ns = await createTestNamespace(kc, 'op-leader');
});

afterAll(async () => {
  await Promise.all(running.map((o) => o.operator.stop()));
});

describe('leader election', () => {
  it('only the leader writes; when it vanishes the other takes over', async () => {
    // `a` does not hand the Lease back on stop: stopping it looks like a crash to `b`.
    const a = await start('operator-a', false);
    await eventually('a leads', async () => a.operator.isLeader());
    const b = await start('operator-b');
    await createApp('one');
    await eventually('one reconciled', async () => Boolean(await deployment('one')));
    // b has watched the same events with warm caches, yet wrote nothing.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(b.operator.isLeader()).toBe(false);
    expect(await b.writes()).toBe(0);
    expect(await a.writes()).toBeGreaterThan(0);

    await a.operator.stop();
    const writesOfA = await a.writes();
    await eventually('b leads after the lease expires', async () => b.operator.isLeader(), 30_000);
    await createApp('two');
    await eventually('two reconciled by b', async () => Boolean(await deployment('two')));
    expect(await b.writes()).toBeGreaterThan(0);
    expect(await a.writes()).toBe(writesOfA);

    const lease = await client.get<Lease>(Resources.Lease, { namespace: ns, name: 'apphost-operator' });
    expect(lease?.spec?.holderIdentity).toBe('operator-b');
    expect(lease?.spec?.leaseTransitions).toBeGreaterThanOrEqual(1);
  });

  it('a clean stop hands the Lease over without waiting for it to expire', async () => {
    const leader = running.find((o) => o.operator.isLeader())!;
    const c = await start('operator-c');
    expect(c.operator.isLeader()).toBe(false);
    await leader.operator.stop();
    // Well under a lease duration plus renew periods would be needed otherwise; bound generously.
    await eventually('c leads', async () => c.operator.isLeader(), 30_000);
    const lease = await client.get<Lease>(Resources.Lease, { namespace: ns, name: 'apphost-operator' });
    expect(lease?.spec?.holderIdentity).toBe('operator-c');
  });
});
