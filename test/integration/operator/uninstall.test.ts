/**
 * Uninstalling in the order people use — the platform first (operator and gateway gone), then the
 * project namespaces — finishes: nothing of ours holds a namespace in Terminating, and the domain
 * Ingresses go with the gateway Service. An operator that comes back cleans up what was deleted while
 * it was away, and strips the finalizer earlier versions put on DomainAssignments.
 * (The real-node suite runs the same order with helm uninstall / kubectl delete -f manifests/.)
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DomainAssignment } from '../../../src/apis/v1alpha1/types.ts';
import { ingressName, LEGACY_FINALIZER } from '../../../src/operator/domainassignment/resources/ingress.ts';
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

/** Namespace deletion runs through the namespace controller's discovery of every resource type. */
const NAMESPACE_GONE_MS = 120_000;

const kc = testKubeConfig();
let client: KubeClient;
let gatewayNs: string;
const operators: TestOperator[] = [];

async function startOperator(projectNs: string): Promise<TestOperator> {
  // The Lease lives with the platform, not in a project namespace the test deletes.
  const op = testOperator(kc, projectNs, {
    gatewayNamespace: gatewayNs,
    gatewayService: 'gw',
    leaderElection: { namespace: gatewayNs },
  });
  operators.push(op);
  await op.operator.start();
  await eventually('operator leads', async () => op.operator.isLeader());
  return op;
}

async function project(prefix: string): Promise<string> {
  const ns = await createTestNamespace(kc, prefix, { 'apphost.dev/project': `proj-${prefix}` });
  await client.create(Resources.App, {
    apiVersion: 'apphost.dev/v1alpha1',
    kind: 'App',
    metadata: { name: 'shop', namespace: ns },
    spec: { runtime: 'cortex', image: 'example.invalid/shop:1' },
  });
  return ns;
}

const domain = (namespace: string, name: string, extra: Partial<DomainAssignment['metadata']> = {}) =>
  client.create(Resources.DomainAssignment, {
    apiVersion: 'apphost.dev/v1alpha1',
    kind: 'DomainAssignment',
    metadata: { name, namespace, ...extra },
    spec: { hostname: `${name}.${namespace}.example.com`, appName: 'shop' },
  });
const ingress = (namespace: string, name: string) =>
  client.get<Ingress>(Resources.Ingress, {
    namespace: gatewayNs,
    name: ingressName({ metadata: { namespace, name } }),
  });
const namespaceGone = async (name: string) => {
  try {
    await kc.makeApiClient(CoreV1Api).readNamespace({ name });
    return false;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return true;
    throw err;
  }
};

beforeAll(async () => {
  await applyCrds();
  client = testClient(kc);
  gatewayNs = await createTestNamespace(kc, 'op-uninstall-gw');
  await createGatewayService(client, gatewayNs, 'gw');
});

afterAll(async () => {
  for (const op of operators) await op.operator.stop();
});

describe('uninstall', () => {
  it('strips the finalizer of earlier versions from DomainAssignments', async () => {
    const ns = await project('op-legacy');
    const op = await startOperator(ns);
    await domain(ns, 'old', { finalizers: [LEGACY_FINALIZER, 'example.com/keep'] });
    await eventually('old finalizer removed', async () => {
      const d = await client.get<DomainAssignment>(Resources.DomainAssignment, {
        namespace: ns,
        name: 'old',
      });
      return !d?.metadata.finalizers?.includes(LEGACY_FINALIZER);
    });
    const d = await client.get<DomainAssignment>(Resources.DomainAssignment, { namespace: ns, name: 'old' });
    expect(d?.metadata.finalizers).toEqual(['example.com/keep']);
    await op.operator.stop();
  });

  it('with the operator gone, deleting a project namespace finishes; a returning operator removes its routes', {
    timeout: NAMESPACE_GONE_MS + 60_000,
  }, async () => {
    const ns = await project('op-uninstall');
    const op = await startOperator(ns);
    await domain(ns, 'www');
    await eventually('www routed', async () => Boolean(await ingress(ns, 'www')));
    // helm uninstall / kubectl delete -f manifests/: the operator is gone...
    await op.operator.stop();
    // ...then the project namespaces go.
    await kc.makeApiClient(CoreV1Api).deleteNamespace({ name: ns });
    await eventually('project namespace deleted', async () => namespaceGone(ns), NAMESPACE_GONE_MS);
    // Reinstalled (or only restarted): the route of the vanished domain goes at start.
    expect(await ingress(ns, 'www')).toBeDefined();
    const back = await startOperator(ns);
    await eventually('route of the deleted domain removed', async () => !(await ingress(ns, 'www')));
    await back.operator.stop();
  });

  it('deleting the gateway Service (the platform uninstalled) removes every domain route for good', async () => {
    const ns = await project('op-gc');
    const op = await startOperator(ns);
    await domain(ns, 'api');
    await eventually('api routed', async () => Boolean(await ingress(ns, 'api')));
    // helm uninstall deletes the gateway Service while the operator may still be running: the route is
    // garbage-collected, and the operator does not put it back (no gateway, no route).
    await client.delete(Resources.Service, { namespace: gatewayNs, name: 'gw' });
    await eventually('api reports GatewayNotFound', async () => {
      const d = await client.get<DomainAssignment>(Resources.DomainAssignment, {
        namespace: ns,
        name: 'api',
      });
      return d?.status?.conditions?.find((c) => c.type === 'Ready')?.reason === 'GatewayNotFound';
    });
    await eventually('Ingress gone with its owner', async () => !(await ingress(ns, 'api')));
    // A resync later it is still gone.
    await new Promise((r) => setTimeout(r, 2 * op.settings.resyncPeriodMs));
    expect(await ingress(ns, 'api')).toBeUndefined();
    // The gateway back (reinstalled): routed again, owned by the new Service.
    const gw = await createGatewayService(client, gatewayNs, 'gw');
    await eventually('api routed again', async () => Boolean(await ingress(ns, 'api')));
    expect((await ingress(ns, 'api'))?.metadata.ownerReferences?.[0]?.uid).toBe(gw.metadata.uid);
  });
});
