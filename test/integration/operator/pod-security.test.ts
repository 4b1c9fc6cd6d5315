/**
 * App pods pass Pod Security `restricted`: in a project namespace that enforces it, the API server's
 * own PodSecurity admission lets the ReplicaSet create the pods of a cortex and a custom App (a pod
 * it refuses shows up as ReplicaFailure and no pod). The real-node suite runs them too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../../src/apis/v1alpha1/types.ts';
import type { KubeClient } from '../../../src/shared/kube/client.ts';
import { type KubeObject, type Pod, Resources } from '../../../src/shared/kube/objects.ts';
import { createTestNamespace, testKubeConfig } from '../../harness/kube.ts';
import { applyCrds, eventually, type TestOperator, testClient, testOperator } from './helpers.ts';

const kc = testKubeConfig();
let client: KubeClient;
let ns: string;
let op: TestOperator;

beforeAll(async () => {
  await applyCrds();
  client = testClient(kc);
  ns = await createTestNamespace(kc, 'op-restricted', {
    'apphost.dev/project': 'proj-op-restricted',
    'pod-security.kubernetes.io/enforce': 'restricted',
    'pod-security.kubernetes.io/enforce-version': 'latest',
  });
  op = testOperator(kc, ns);
  await op.operator.start();
  await eventually('operator leads', async () => op.operator.isLeader());
});

afterAll(async () => {
  await op?.operator.stop();
});

describe('Pod Security restricted', () => {
  it.each<[string, App['spec']]>([
    ['cortex', { runtime: 'cortex', image: 'example.invalid/hello:1' }],
    ['custom', { runtime: 'custom', image: 'example.invalid/server:1', port: 9000, entrypoint: ['/server'] }],
  ])('admits the pods of a %s App', async (runtime, spec) => {
    const name = `${runtime}-app`;
    await client.create(Resources.App, {
      apiVersion: 'apphost.dev/v1alpha1',
      kind: 'App',
      metadata: { name, namespace: ns },
      spec,
    } as KubeObject);
    const pods = async () =>
      (await client.list<Pod>(Resources.Pod, { namespace: ns, labelSelector: `apphost.dev/app=${name}` }))
        .items;
    const refused = async () =>
      (await client.get<App>(Resources.App, { namespace: ns, name }))?.status?.conditions?.find(
        (c) => c.type === 'Ready' && c.reason === 'ReplicaFailure',
      );
    await eventually(
      `a pod of ${name} admitted (or refused)`,
      async () => (await pods()).length > 0 || Boolean(await refused()),
    );
    expect((await refused())?.message).toBeUndefined();
    const [pod] = await pods();
    expect(pod?.spec?.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(pod?.spec?.automountServiceAccountToken).toBe(false);
  });
});
