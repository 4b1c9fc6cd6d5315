/**
 * App status names why pods fail, from the pods' own status, as soon as the pod changes: the
 * operator runs with a resync period far beyond the test's bounds, so only the pod watch can bring
 * the App back. The test control plane has no node, so a test writes the pod status a kubelet would
 * (the real-node suite in test/cluster/ shows the same causes from a real kubelet); admission
 * refusals are the API server's own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App, Condition } from '../../../src/apis/v1alpha1/types.ts';
import type { KubeClient } from '../../../src/shared/kube/client.ts';
import { type KubeEvent, type KubeObject, Resources } from '../../../src/shared/kube/objects.ts';
import { createTestNamespace, testKubeConfig } from '../../harness/kube.ts';
import {
  applyCrds,
  eventually,
  reconcileCount,
  setPodsStatus,
  type TestOperator,
  testClient,
  testOperator,
} from './helpers.ts';

const kc = testKubeConfig();
let client: KubeClient;
let ns: string;
let op: TestOperator;

const IMAGE = 'registry.invalid/team/hello:1';
const SYNTAX_ERROR =
  'cannot import /app/main.py:\n  File "/app/main.py", line 1\n    def broken(:\n               ^\nSyntaxError: invalid syntax';

const createApp = (name: string, spec: Partial<App['spec']> = {}) =>
  client.create(Resources.App, {
    apiVersion: 'apphost.dev/v1alpha1',
    kind: 'App',
    metadata: { name, namespace: ns },
    spec: { runtime: 'cortex', image: IMAGE, ...spec },
  } as KubeObject);
const getApp = (name: string) => client.get<App>(Resources.App, { namespace: ns, name });
const readyOf = (a: App | undefined): Condition | undefined =>
  a?.status?.conditions?.find((c) => c.type === 'Ready');

/** The container status a kubelet reports, for the app container. */
const appContainer = (fields: Record<string, unknown>) => ({
  containerStatuses: [{ name: 'app', image: IMAGE, imageID: '', ready: false, restartCount: 0, ...fields }],
});

async function expectReady(name: string, want: { status: string; reason: string; message: RegExp }) {
  await eventually(`${name} Ready=${want.status}/${want.reason}`, async () => {
    const r = readyOf(await getApp(name));
    return r?.reason === want.reason && want.message.test(r.message ?? '');
  });
  const a = await getApp(name);
  expect(readyOf(a)).toMatchObject({ status: want.status, reason: want.reason });
  return a;
}

beforeAll(async () => {
  await applyCrds();
  client = testClient(kc);
  ns = await createTestNamespace(kc, 'op-status', { 'apphost.dev/project': 'proj-op-status' });
  op = testOperator(kc, ns, { resyncPeriodMs: 3_600_000 });
  await op.operator.start();
  await eventually('operator leads', async () => op.operator.isLeader());
});

afterAll(async () => {
  await op?.operator.stop();
});

describe('App status names why its pods fail', () => {
  it('an image that cannot be pulled: ImagePullFailed with the image name, no URL, a Warning Event', async () => {
    await createApp('pull');
    await eventually('pods of pull', async () =>
      setPodsStatus(client, ns, 'pull', () =>
        appContainer({
          state: {
            waiting: {
              reason: 'ErrImagePull',
              message: `failed to pull and unpack image "${IMAGE}": failed to resolve reference: not found`,
            },
          },
        }),
      ),
    );
    const a = await expectReady('pull', {
      status: 'False',
      reason: 'ImagePullFailed',
      message: /^image "registry\.invalid\/team\/hello:1" cannot be pulled: failed to pull/,
    });
    expect(a?.status?.url).toBeUndefined();
    // The kubelet's back-off notice does not replace the pull error.
    const seen = await reconcileCount(op);
    await setPodsStatus(client, ns, 'pull', () =>
      appContainer({
        state: { waiting: { reason: 'ImagePullBackOff', message: `Back-off pulling image "${IMAGE}"` } },
      }),
    );
    await eventually('the back-off has been reconciled', async () => (await reconcileCount(op)) > seen);
    expect(readyOf(await getApp('pull'))?.message).toMatch(/failed to resolve reference: not found/);
    await eventually('a Warning Event names the cause', async () => {
      const events = await client.list<KubeEvent>(Resources.Event, { namespace: ns });
      return events.items.some(
        (e) =>
          e.involvedObject?.name === 'pull' &&
          e.type === 'Warning' &&
          e.reason === 'ImagePullFailed' &&
          /cannot be pulled/.test(e.message ?? ''),
      );
    });
  });

  it('a crash loop: CrashLoopBackOff with the exit code and the termination message', async () => {
    await createApp('crash');
    await eventually('pods of crash', async () =>
      setPodsStatus(client, ns, 'crash', (now) => ({
        phase: 'Running',
        ...appContainer({
          restartCount: 2,
          state: {
            waiting: { reason: 'CrashLoopBackOff', message: 'back-off 20s restarting failed container' },
          },
          lastState: {
            terminated: {
              exitCode: 1,
              reason: 'Error',
              message: SYNTAX_ERROR,
              startedAt: now,
              finishedAt: now,
            },
          },
        }),
      })),
    );
    const a = await expectReady('crash', {
      status: 'False',
      reason: 'CrashLoopBackOff',
      message:
        /^container "app" exited with code 1: cannot import \/app\/main\.py:[\s\S]*SyntaxError: invalid syntax$/,
    });
    expect(a?.status?.url).toBeUndefined();
  });

  it('a pod no node can take: Unschedulable with the scheduler message', async () => {
    await createApp('big', { resources: { memory: '64Ti' } });
    await eventually('pods of big', async () =>
      setPodsStatus(client, ns, 'big', (now) => ({
        conditions: [
          {
            type: 'PodScheduled',
            status: 'False',
            reason: 'Unschedulable',
            message: '0/1 nodes are available: 1 Insufficient memory.',
            lastTransitionTime: now,
          },
        ],
      })),
    );
    await expectReady('big', {
      status: 'False',
      reason: 'Unschedulable',
      message: /Insufficient memory/,
    });
  });

  it('pods refused at admission (here a LimitRange): ReplicaFailure with the API server message', async () => {
    const limitedNs = await createTestNamespace(kc, 'op-limits', { 'apphost.dev/project': 'proj-op-limits' });
    const limitedOp = testOperator(kc, limitedNs, { resyncPeriodMs: 3_600_000 });
    await client.create(
      { apiVersion: 'v1', kind: 'LimitRange', plural: 'limitranges', namespaced: true },
      {
        apiVersion: 'v1',
        kind: 'LimitRange',
        metadata: { name: 'small', namespace: limitedNs },
        spec: { limits: [{ type: 'Container', max: { memory: '1Gi' } }] },
      },
    );
    await limitedOp.operator.start();
    try {
      await client.create(Resources.App, {
        apiVersion: 'apphost.dev/v1alpha1',
        kind: 'App',
        metadata: { name: 'refused', namespace: limitedNs },
        spec: { runtime: 'cortex', image: IMAGE, resources: { memory: '2Gi' } },
      } as KubeObject);
      const get = () => client.get<App>(Resources.App, { namespace: limitedNs, name: 'refused' });
      await eventually(
        'refused reports ReplicaFailure',
        async () => readyOf(await get())?.reason === 'ReplicaFailure',
      );
      const a = await get();
      expect(readyOf(a)?.message).toMatch(
        /^pods cannot be created: pods "refused-.*" is forbidden: maximum memory usage per Container is 1Gi/,
      );
      expect(a?.status?.url).toBeUndefined();
    } finally {
      await limitedOp.operator.stop();
    }
  });

  it('the first Ready publishes the URL; a cause clears once the pods recover', async () => {
    await setPodsStatus(client, ns, 'crash', (now) => ({
      phase: 'Running',
      conditions: [
        { type: 'Ready', status: 'True', lastTransitionTime: now },
        { type: 'ContainersReady', status: 'True', lastTransitionTime: now },
      ],
      ...appContainer({ ready: true, restartCount: 3, state: { running: { startedAt: now } } }),
    }));
    await eventually('crash becomes Ready', async () => readyOf(await getApp('crash'))?.status === 'True');
    expect((await getApp('crash'))?.status?.url).toBe(`http://crash.${ns}.svc.cluster.local`);
  });
});
