/**
 * Spec §4.1 end to end, across every piece it touches, on the real kube-apiserver:
 * the management API (kube store) unassigns a custom domain → the DomainAssignment loses its app →
 * the operator removes the Ingress rule → the gateway (kube resolver) stops routing the host (404),
 * while the app stays reachable at its /v4 path. Calls go to the real Python runtime.
 */
import {
  CoreV1Api,
  type KubeConfig,
  NetworkingV1Api,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createGateway, type Gateway } from '../../src/gateway/gateway.ts';
import { gatewayKubeReader } from '../../src/gateway/kube-client.ts';
import { DEFAULT_GATEWAY_KUBE_SETTINGS } from '../../src/gateway/kube-settings.ts';
import { createKubeAppResolver, type KubeAppResolver } from '../../src/gateway/resolver/kube.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../../src/gateway/settings.ts';
import { createServiceAccount } from '../../src/management/service-accounts.ts';
import { createKubeStore } from '../../src/management/store/kube.ts';
import { ingressName } from '../../src/operator/domainassignment/resources/ingress.ts';
import type { ClosableKubeReader } from '../../src/shared/kube/reader.ts';
import { silentLogger } from '../../src/shared/log.ts';
import { createRunTokenVerifier, type KeySet } from '../../src/shared/run-tokens.ts';
import { createSecretBox } from '../../src/shared/secretbox.ts';
import { applyProjectCrds } from '../harness/crds.ts';
import { testKubeAccess, testKubeConfig } from '../harness/kube.ts';
import { waitFor } from '../harness/process.ts';
import { closeServer, listen, type Runtime, startRuntime } from '../integration/gateway/helpers.ts';
import {
  createAppCr,
  createNamespace,
  createProjectNamespace,
  deleteNamespaces,
  memoryDeliveries,
  memoryRuns,
  uniqueId,
} from '../integration/management/fixtures.ts';
import { call, type RunningApi, startApi } from '../integration/management/server.ts';
import {
  createGatewayService,
  type TestOperator,
  testClient,
  testOperator,
} from '../integration/operator/helpers.ts';

const CONVERGE_MS = 60_000;

describe('unassigning a custom domain', () => {
  let kc: KubeConfig;
  let op: TestOperator | undefined;
  let api: RunningApi | undefined;
  let runtime: Runtime | undefined;
  let kubeReader: ClosableKubeReader | undefined;
  let resolver: KubeAppResolver | undefined;
  let gateway: Gateway | undefined;
  let gatewayServer: Awaited<ReturnType<typeof listen>> | undefined;
  let nc: NatsConnection | undefined;
  let ns: string;
  let project: string;
  let saToken: string;
  let runToken: string;
  const namespaces: string[] = [];

  beforeAll(async () => {
    kc = testKubeConfig();
    await applyProjectCrds();
    project = uniqueId('e2e');
    ns = await createProjectNamespace(kc, project);
    const keysNs = uniqueId('e2e-keys');
    await createNamespace(kc, keysNs);
    namespaces.push(ns, keysNs);
    await createAppCr(kc, ns, 'hello');

    // Domain Ingresses route to (and are owned by) the gateway Service: a stand-in for it.
    await createGatewayService(testClient(kc), ns, 'apphost-gateway');
    op = testOperator(kc, ns, { gatewayService: 'apphost-gateway' });
    await op.operator.start();

    const store = createKubeStore(kc, { keysNamespace: keysNs });
    saToken = (await createServiceAccount(store, project, 'admin', new Date('2099-01-01'))).token;
    api = await startApi({ store, runs: memoryRuns(), deliveries: memoryDeliveries() });

    // The app's pods cannot run here (no nodes), so the resolver sends its traffic to a real runtime.
    runtime = await startRuntime();
    const upstream = runtime.url;
    // No kubelet gives pods addresses here: route through one fixed upstream (Service-style routing).
    kubeReader = gatewayKubeReader(await testKubeAccess(), DEFAULT_GATEWAY_KUBE_SETTINGS);
    resolver = createKubeAppResolver({
      client: kubeReader,
      log: silentLogger(),
      routing: 'service',
      upstreamFor: () => upstream,
    });
    await resolver.start();
    let keys: KeySet = await store.getRunTokenKeys();
    nc = await connect({ servers: inject('natsUrl') });
    gateway = createGateway({
      resolver,
      verifyRunToken: createRunTokenVerifier(() => keys),
      nc,
      secretBox: createSecretBox('e2e-platform-key-0123456789'),
      log: silentLogger(),
      registry: new Registry(),
      settings: DEFAULT_GATEWAY_SETTINGS,
    });
    gatewayServer = await listen(gateway.callback());

    const issued = await call(api.url, 'POST', `/v2/projects/${project}/run-tokens`, {
      token: saToken,
      body: { expires_at: new Date(Date.now() + 3_600_000).toISOString() },
    });
    expect(issued.status, issued.text).toBe(201);
    runToken = (issued.body as { token: string }).token;
    keys = await store.getRunTokenKeys();

    // Ready=True needs ready pods: kube-controller-manager made them; mark them Ready as a kubelet would.
    const core = kc.makeApiClient(CoreV1Api);
    await waitFor(
      'App hello ready',
      async () => {
        const pods = await core.listNamespacedPod({ namespace: ns, labelSelector: 'apphost.dev/app=hello' });
        const now = new Date().toISOString();
        for (const pod of pods.items) {
          if (pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) continue;
          await core.patchNamespacedPodStatus(
            {
              namespace: ns,
              name: pod.metadata?.name ?? '',
              body: {
                status: {
                  phase: 'Running',
                  conditions: [
                    { type: 'Ready', status: 'True', lastTransitionTime: now },
                    { type: 'ContainersReady', status: 'True', lastTransitionTime: now },
                  ],
                },
              },
            },
            setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
          );
        }
        return (await resolver?.resolve(project, 'hello'))?.ready === true;
      },
      CONVERGE_MS,
      500,
    );
  });

  afterAll(async () => {
    if (gatewayServer) await closeServer(gatewayServer.server);
    await gateway?.close();
    await nc?.close();
    await resolver?.stop();
    await kubeReader?.close();
    await runtime?.proc.stop(5_000);
    await api?.close();
    await op?.operator.stop();
    if (kc) await deleteNamespaces(kc, namespaces);
  });

  const viaHost = async (host: string) => {
    const res = await request(`${gatewayServer?.url}/echo`, {
      method: 'POST',
      headers: { host, authorization: `Bearer ${runToken}`, 'content-type': 'application/json' },
      body: '{"via":"domain"}',
    });
    return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
  };

  it('stops routing the host, drops the Ingress rule and keeps the domain record', async () => {
    const hostname = `${project}.shop.test`;
    const p = `/v2/projects/${project}`;
    const net = kc.makeApiClient(NetworkingV1Api);
    const ingress = ingressName({ metadata: { namespace: ns, name: 'shop' } });
    const ingressHosts = async () => {
      try {
        const ing = await net.readNamespacedIngress({ namespace: ns, name: ingress });
        return (ing.spec?.rules ?? []).map((r) => r.host);
      } catch (err) {
        if ((err as { code?: number }).code === 404) return [];
        throw err;
      }
    };

    const created = await call(api!.url, 'POST', `${p}/domains`, {
      token: saToken,
      body: { domain_id: 'shop', hostname },
    });
    expect(created.status, created.text).toBe(201);
    const assigned = await call(api!.url, 'PUT', `${p}/domains/shop/assign`, {
      token: saToken,
      body: { app_name: 'hello' },
    });
    expect(assigned.status, assigned.text).toBe(200);

    await waitFor(
      'Ingress rule for the host',
      async () => (await ingressHosts()).includes(hostname),
      CONVERGE_MS,
    );
    await waitFor(
      'gateway routes the host',
      async () => (await viaHost(hostname)).status === 200,
      CONVERGE_MS,
    );
    expect((await viaHost(hostname)).body).toEqual({ echo: { via: 'domain' } });

    // Without a token, with a bad one: refused, nothing changes.
    expect((await call(api!.url, 'DELETE', `${p}/domains/shop/assign`, {})).status).toBe(401);
    expect(
      (await call(api!.url, 'DELETE', `${p}/domains/shop/assign`, { token: `${saToken}x` })).status,
    ).toBe(401);
    expect((await viaHost(hostname)).status).toBe(200);

    const unassigned = await call(api!.url, 'DELETE', `${p}/domains/shop/assign`, { token: saToken });
    expect(unassigned.status, unassigned.text).toBe(200);

    await waitFor(
      'Ingress rule removed',
      async () => !(await ingressHosts()).includes(hostname),
      CONVERGE_MS,
    );
    await waitFor(
      'gateway stops routing the host',
      async () => (await viaHost(hostname)).status === 404,
      CONVERGE_MS,
    );
    expect((await viaHost(hostname)).body).toMatchObject({ error: { code: 'not_found' } });

    // The domain record stays; the app is still reachable at its own path.
    const after = await call(api!.url, 'GET', `${p}/domains/shop`, { token: saToken });
    expect(after.body).toMatchObject({ hostname, assigned: false });
    // A second unassign is the same 200 (idempotent).
    const again = await call(api!.url, 'DELETE', `${p}/domains/shop/assign`, { token: saToken });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(unassigned.body);
    const direct = await request(`${gatewayServer?.url}/v4/${project}/hello/echo`, {
      method: 'POST',
      headers: { authorization: `Bearer ${runToken}`, 'content-type': 'application/json' },
      body: '{"via":"path"}',
    });
    expect(direct.statusCode).toBe(200);
    expect(await direct.body.json()).toEqual({ echo: { via: 'path' } });
  });
});
