/**
 * The operator's autoscaler against the real kube-apiserver (+ controller-manager) and a real NATS:
 * an idle App with minReplicas 0 goes to zero after its cooldown (status and Deployment), a held call
 * wakes it at once, reported load scales it out to maxReplicas, a steady load makes no writes, and a
 * scale-down marks the busy pod with a higher deletion cost.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../../src/apis/v1alpha1/types.ts';
import { createLoadReporter } from '../../../src/gateway/balancer/reporter.ts';
import { POD_DELETION_COST } from '../../../src/operator/autoscaler/controller.ts';
import { DEFAULT_AUTOSCALER_LOOP_SETTINGS } from '../../../src/operator/settings.ts';
import type { AppLoad } from '../../../src/shared/contracts/scaling.ts';
import type { KubeClient } from '../../../src/shared/kube/client.ts';
import { type Deployment, Resources } from '../../../src/shared/kube/objects.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { createTestNamespace, testKubeConfig } from '../../harness/kube.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { applyCrds, eventually, type TestOperator, testClient, testOperator } from './helpers.ts';

const kc = testKubeConfig();
const project = `proj-as-${Date.now().toString(36)}`;
let client: KubeClient;
let ns: string;
let op: TestOperator;
let nats: NatsServer;
let nc: NatsConnection;

const getApp = (name: string) => client.get<App>(Resources.App, { namespace: ns, name });
const getDep = (name: string) => client.get<Deployment>(Resources.Deployment, { namespace: ns, name });
const load = (appName: string, over: Partial<AppLoad>): AppLoad => ({
  projectId: project,
  appName,
  concurrency: 0,
  inflight: 0,
  queued: 0,
  runs: 0,
  ...over,
});

/** What a kubelet would do: give each pod of the App an IP and mark it ready. */
async function makePodsReady(appName: string): Promise<string[]> {
  const core = kc.makeApiClient(CoreV1Api);
  const pods = await core.listNamespacedPod({ namespace: ns, labelSelector: `apphost.dev/app=${appName}` });
  const now = new Date().toISOString();
  return Promise.all(
    pods.items.map(async (pod, i) => {
      const name = pod.metadata?.name ?? '';
      await client.mergePatch(
        { apiVersion: 'v1', kind: 'Pod', plural: 'pods', namespaced: true },
        { namespace: ns, name },
        {
          status: {
            phase: 'Running',
            podIP: `10.9.0.${i + 1}`,
            podIPs: [{ ip: `10.9.0.${i + 1}` }],
            conditions: [
              { type: 'Ready', status: 'True', lastTransitionTime: now },
              { type: 'ContainersReady', status: 'True', lastTransitionTime: now },
            ],
          },
        },
        'status',
      );
      return name;
    }),
  );
}

beforeAll(async () => {
  await applyCrds();
  client = testClient(kc);
  nats = await startNats();
  nc = await connect({ servers: nats.url });
  ns = await createTestNamespace(kc, 'op-as', { 'apphost.dev/project': project });
  op = testOperator(
    kc,
    ns,
    {
      autoscaler: {
        ...DEFAULT_AUTOSCALER_LOOP_SETTINGS,
        tickMs: 250,
        stableWindowMs: 1_500,
        panicWindowMs: 500,
        reportTtlMs: 1_500,
      },
    },
    undefined,
    nc,
  );
  await op.operator.start();
  await eventually('operator leads', async () => op.operator.isLeader());
});

afterAll(async () => {
  await op?.operator.stop();
  await nc?.close();
  await nats?.stop();
});

describe('autoscaler', () => {
  it('an idle App with minReplicas 0 starts one replica, then goes to zero and says so', async () => {
    await client.create(Resources.App, {
      apiVersion: 'apphost.dev/v1alpha1',
      kind: 'App',
      metadata: { name: 'fn', namespace: ns },
      spec: {
        runtime: 'cortex',
        image: 'example.invalid/fn:1',
        scaling: {
          minReplicas: 0,
          maxReplicas: 3,
          replicaConcurrency: 1,
          targetUtilization: 100,
          cooldownSeconds: 1,
        },
      },
    } as App);
    await eventually('one replica first', async () => (await getDep('fn'))?.spec.replicas === 1);
    await eventually('scaled to zero', async () => {
      const [a, d] = await Promise.all([getApp('fn'), getDep('fn')]);
      const ready = a?.status?.conditions?.find((c) => c.type === 'Ready');
      return (
        a?.status?.desiredReplicas === 0 &&
        d?.spec.replicas === 0 &&
        ready?.status === 'True' &&
        ready.reason === 'ScaledToZero'
      );
    });
  });

  it('a held call wakes it at once; reported load scales it out to maxReplicas', async () => {
    const reporter = createLoadReporter({ nc, log: silentLogger(), intervalMs: 200 });
    reporter.wake(project, 'fn', load('fn', { queued: 1, concurrency: 1 }));
    await eventually('woken', async () => (await getDep('fn'))?.spec.replicas === 1);

    // Five calls in flight at one call per replica: capped at maxReplicas 3.
    const timer = setInterval(() => {
      nc.publish(
        `apphost.load.${reporter.reporter}`,
        JSON.stringify({
          v: 1,
          reporter: reporter.reporter,
          intervalMs: 200,
          apps: [load('fn', { concurrency: 5, inflight: 5, replicas: { '10.9.0.1:8080': 1 } })],
        }),
      );
    }, 200);
    try {
      await eventually('scaled out', async () => {
        const a = await getApp('fn');
        return a?.status?.desiredReplicas === 3 && (await getDep('fn'))?.spec.replicas === 3;
      });
      const events = await kc
        .makeApiClient(CoreV1Api)
        .listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=fn,reason=Scaled' });
      expect(events.items.map((e) => e.message).join('\n')).toMatch(/→ 3 replicas \((Panic|MaxReplicas)/);

      // Steady under the same load: no writes. The ReplicaSet controller creates the third pod after the
      // Deployment says 3, so wait for it before marking the pods ready.
      await eventually('three pods', async () => {
        const list = await kc
          .makeApiClient(CoreV1Api)
          .listNamespacedPod({ namespace: ns, labelSelector: 'apphost.dev/app=fn' });
        return list.items.length === 3;
      });
      const pods = await makePodsReady('fn');
      expect(pods.length).toBe(3);
      await eventually('status settled', async () => {
        const w = await op.writes();
        await new Promise((r) => setTimeout(r, 1_500));
        return (await op.writes()) === w;
      });
      const before = await op.writes();
      await new Promise((r) => setTimeout(r, 2_000));
      expect(await op.writes()).toBe(before);
    } finally {
      clearInterval(timer);
    }
  });

  it('a scale-down marks the pod still serving a call as costlier to delete', async () => {
    // One call left in flight, on the pod with IP 10.9.0.1; the others are idle.
    const reporter = createLoadReporter({ nc, log: silentLogger(), intervalMs: 200 });
    const timer = setInterval(() => {
      nc.publish(
        `apphost.load.${reporter.reporter}`,
        JSON.stringify({
          v: 1,
          reporter: reporter.reporter,
          intervalMs: 200,
          apps: [load('fn', { concurrency: 1, inflight: 1, replicas: { '10.9.0.1:8080': 1 } })],
        }),
      );
    }, 200);
    try {
      await eventually('scaled down to 1', async () => (await getApp('fn'))?.status?.desiredReplicas === 1);
      const pods = await kc
        .makeApiClient(CoreV1Api)
        .listNamespacedPod({ namespace: ns, labelSelector: 'apphost.dev/app=fn' });
      const costs = pods.items.map((p) => [p.status?.podIP, p.metadata?.annotations?.[POD_DELETION_COST]]);
      expect(costs).toContainEqual(['10.9.0.1', '1']);
    } finally {
      clearInterval(timer);
    }
  });
});
