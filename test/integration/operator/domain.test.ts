/**
 * DomainAssignments against the real kube-apiserver: assign, reassign, unassign and delete a domain;
 * the Ingress rule to the gateway follows every time, and a missing App is reported.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DomainAssignment } from '../../../src/apis/v1alpha1/types.ts';
import { ingressName } from '../../../src/operator/domainassignment/resources/ingress.ts';
import type { KubeClient } from '../../../src/shared/kube/client.ts';
import { type Ingress, Resources } from '../../../src/shared/kube/objects.ts';
import { createTestNamespace, testKubeConfig } from '../../harness/kube.ts';
import {
  applyCrds,
  createGatewayService,
  eventually,
  type TestOperator,
  testClient,
  testOperator,
} from './helpers.ts';

const kc = testKubeConfig();
let client: KubeClient;
let ns: string;
let gatewayNs: string;
let op: TestOperator;
let gatewayServiceUid: string | undefined;

const ref = (name: string) => ({ namespace: ns, name });
const ingressRef = (name: string) => ({
  namespace: gatewayNs,
  name: ingressName({ metadata: { namespace: ns, name } }),
});
const ingress = (name: string) => client.get<Ingress>(Resources.Ingress, ingressRef(name));
const domain = (name: string) => client.get<DomainAssignment>(Resources.DomainAssignment, ref(name));
const ready = (o: DomainAssignment | undefined) => o?.status?.conditions?.find((c) => c.type === 'Ready');

async function createApp(name: string) {
  await client.create(Resources.App, {
    apiVersion: 'apphost.dev/v1alpha1',
    kind: 'App',
    metadata: { name, namespace: ns },
    spec: { runtime: 'cortex', image: `example.invalid/${name}:1` },
  });
}

beforeAll(async () => {
  await applyCrds();
  client = testClient(kc);
  ns = await createTestNamespace(kc, 'op-domain', { 'apphost.dev/project': 'proj-op-domain' });
  gatewayNs = await createTestNamespace(kc, 'op-gateway');
  gatewayServiceUid = (await createGatewayService(client, gatewayNs, 'gw')).metadata.uid;
  op = testOperator(kc, ns, { gatewayNamespace: gatewayNs, gatewayService: 'gw', ingressClass: 'nginx' });
  await op.operator.start();
  await eventually('operator leads', async () => op.operator.isLeader());
  await createApp('alpha');
  await createApp('beta');
});

afterAll(async () => {
  await op?.operator.stop();
});

describe('DomainAssignment → Ingress', () => {
  it('assigning a domain routes its hostname to the gateway', async () => {
    await client.create(Resources.DomainAssignment, {
      apiVersion: 'apphost.dev/v1alpha1',
      kind: 'DomainAssignment',
      metadata: { name: 'dom-1', namespace: ns },
      spec: { hostname: 'api.example.com', appName: 'alpha', tlsSecretName: 'api-tls' },
    });
    await eventually('Ingress for dom-1', async () => Boolean(await ingress('dom-1')));
    const ing = (await ingress('dom-1'))!;
    expect(ing.spec).toEqual({
      ingressClassName: 'nginx',
      tls: [{ hosts: ['api.example.com'], secretName: 'api-tls' }],
      rules: [
        {
          host: 'api.example.com',
          http: {
            paths: [
              { path: '/', pathType: 'Prefix', backend: { service: { name: 'gw', port: { number: 80 } } } },
            ],
          },
        },
      ],
    });
    expect(ing.metadata.annotations).toMatchObject({
      'apphost.dev/app': 'alpha',
      'apphost.dev/domain-assignment': `${ns}/dom-1`,
    });
    // Owned by the gateway Service, so an uninstall that deletes it takes every route along.
    expect(ing.metadata.ownerReferences).toEqual([
      { apiVersion: 'v1', kind: 'Service', name: 'gw', uid: gatewayServiceUid },
    ]);
    await eventually(
      'dom-1 Ready=True Routed',
      async () => ready(await domain('dom-1'))?.reason === 'Routed',
    );
    // No finalizer: deleting the domain or its namespace never waits for the operator.
    expect((await domain('dom-1'))?.metadata.finalizers ?? []).toEqual([]);
  });

  it('reassigning follows the new app; changing the hostname moves the rule', async () => {
    await client.mergePatch(Resources.DomainAssignment, ref('dom-1'), { spec: { appName: 'beta' } });
    await eventually(
      'Ingress names beta',
      async () => (await ingress('dom-1'))?.metadata.annotations?.['apphost.dev/app'] === 'beta',
    );
    await client.mergePatch(Resources.DomainAssignment, ref('dom-1'), {
      spec: { hostname: 'www.example.org' },
    });
    await eventually(
      'Ingress host follows',
      async () => (await ingress('dom-1'))?.spec.rules?.[0]?.host === 'www.example.org',
    );
    expect((await ingress('dom-1'))?.spec.rules).toHaveLength(1);
  });

  it('unassigning removes the rule and keeps the domain', async () => {
    await client.mergePatch(Resources.DomainAssignment, ref('dom-1'), { spec: { appName: '' } });
    await eventually('Ingress removed', async () => !(await ingress('dom-1')));
    await eventually('dom-1 Unassigned', async () => ready(await domain('dom-1'))?.reason === 'Unassigned');
    // Assign again: the rule comes back.
    await client.mergePatch(Resources.DomainAssignment, ref('dom-1'), { spec: { appName: 'alpha' } });
    await eventually(
      'Ingress back',
      async () => (await ingress('dom-1'))?.metadata.annotations?.['apphost.dev/app'] === 'alpha',
    );
  });

  it('a domain assigned to a missing app is not ready and has no rule, until the app appears', async () => {
    await client.create(Resources.DomainAssignment, {
      apiVersion: 'apphost.dev/v1alpha1',
      kind: 'DomainAssignment',
      metadata: { name: 'dom-2', namespace: ns },
      spec: { hostname: 'later.example.com', appName: 'gamma' },
    });
    await eventually('dom-2 AppNotFound', async () => {
      const r = ready(await domain('dom-2'));
      return r?.status === 'False' && r.reason === 'AppNotFound';
    });
    expect(ready(await domain('dom-2'))?.message).toMatch(/app "gamma" does not exist/);
    expect(await ingress('dom-2')).toBeUndefined();
    await createApp('gamma');
    await eventually('dom-2 routed once gamma exists', async () => Boolean(await ingress('dom-2')));
  });

  it('restores a deleted Ingress (drift)', async () => {
    const before = (await ingress('dom-2'))!;
    await client.delete(Resources.Ingress, ingressRef('dom-2'));
    await eventually('Ingress recreated', async () => {
      const i = await ingress('dom-2');
      return Boolean(i && i.metadata.uid !== before.metadata.uid);
    });
  });

  it('makes no writes while nothing changes', { timeout: 120_000 }, async () => {
    await eventually('settled', async () => {
      const w = await op.writes();
      await new Promise((r) => setTimeout(r, 2 * op.settings.resyncPeriodMs));
      return (await op.writes()) === w;
    });
    const versions = async () =>
      [
        (await domain('dom-1'))?.metadata.resourceVersion,
        (await domain('dom-2'))?.metadata.resourceVersion,
        (await ingress('dom-1'))?.metadata.resourceVersion,
        (await ingress('dom-2'))?.metadata.resourceVersion,
      ].join(',');
    const before = { writes: await op.writes(), versions: await versions() };
    await new Promise((r) => setTimeout(r, 3 * op.settings.resyncPeriodMs + 500));
    expect({ writes: await op.writes(), versions: await versions() }).toEqual(before);
  });

  it('deleting a domain removes its rule', async () => {
    await client.delete(Resources.DomainAssignment, ref('dom-1'));
    await eventually(
      'Ingress and domain gone',
      async () => !(await ingress('dom-1')) && !(await domain('dom-1')),
    );
  });
});
