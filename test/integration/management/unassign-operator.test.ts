/**
 * Unassign across the seam with the real operator: the API clears the DomainAssignment's app, and
 * the operator (createOperator, scoped to this test's namespace) removes the Ingress rule for the host.
 * The gateway side (Host routing) is covered by the cross-piece e2e.
 */
import { type KubeConfig, NetworkingV1Api } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createServiceAccount } from '../../../src/management/service-accounts.ts';
import { createKubeStore } from '../../../src/management/store/kube.ts';
import { ingressName } from '../../../src/operator/domainassignment/resources/ingress.ts';
import { createOperator, type Operator } from '../../../src/operator/operator.ts';
import { defaultOperatorSettings } from '../../../src/operator/settings.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { testKubeConfig } from '../../harness/kube.ts';
import { waitFor } from '../../harness/process.ts';
import {
  createAppCr,
  createNamespace,
  createProjectNamespace,
  deleteNamespaces,
  ensureCrds,
  memoryDeliveries,
  memoryRuns,
  uniqueId,
} from './fixtures.ts';
import { call, type RunningApi, startApi } from './server.ts';

const haveKube = Boolean(inject('kubeconfigYaml'));

describe.skipIf(!haveKube)('unassign with the real operator', () => {
  let kc: KubeConfig;
  let operator: Operator | undefined;
  let api: RunningApi | undefined;
  let ns: string;
  let project: string;
  let token: string;
  const namespaces: string[] = [];

  beforeAll(async () => {
    kc = testKubeConfig();
    await ensureCrds(kc);
    project = uniqueId('op');
    ns = await createProjectNamespace(kc, project);
    const keysNs = uniqueId('mgmt-keys');
    await createNamespace(kc, keysNs);
    namespaces.push(ns, keysNs);
    await createAppCr(kc, ns, 'hello');
    const base = defaultOperatorSettings();
    operator = createOperator({
      kc,
      log: silentLogger(),
      registry: new Registry(),
      settings: defaultOperatorSettings({
        watchNamespace: ns,
        gatewayNamespace: ns,
        gatewayService: 'gw',
        runtimeImage: 'example.invalid/runtime-python:test',
        resyncPeriodMs: 2_000,
        backoff: { baseDelayMs: 100, maxDelayMs: 2_000 },
        leaderElection: {
          ...base.leaderElection,
          namespace: ns,
          identity: `mgmt-test-${process.pid}`,
          leaseDurationMs: 3_000,
          renewDeadlineMs: 2_000,
          retryPeriodMs: 500,
        },
      }),
    });
    await operator.start();
    const store = createKubeStore(kc, { keysNamespace: keysNs });
    token = (await createServiceAccount(store, project, 'admin', new Date('2099-01-01'))).token;
    api = await startApi({ store, runs: memoryRuns(), deliveries: memoryDeliveries() });
  });
  afterAll(async () => {
    await api?.close();
    await operator?.stop();
    if (kc) await deleteNamespaces(kc, namespaces);
  });

  it('assign creates the Ingress rule; DELETE .../assign removes it and keeps the domain', async () => {
    if (!api) throw new Error('no api');
    const net = kc.makeApiClient(NetworkingV1Api);
    const name = ingressName({ metadata: { namespace: ns, name: 'shop' } });
    const ingressHosts = async () => {
      try {
        const ing = await net.readNamespacedIngress({ namespace: ns, name });
        return (ing.spec?.rules ?? []).map((r) => r.host);
      } catch (err) {
        if ((err as { code?: number }).code === 404) return [];
        throw err;
      }
    };
    const p = `/v2/projects/${project}`;
    expect(
      (
        await call(api.url, 'POST', `${p}/domains`, {
          token,
          body: { domain_id: 'shop', hostname: `${project}.shop.test` },
        })
      ).status,
    ).toBe(201);
    const assigned = await call(api.url, 'PUT', `${p}/domains/shop/assign`, {
      token,
      body: { app_name: 'hello' },
    });
    expect(assigned.status, assigned.text).toBe(200);
    await waitFor(
      'Ingress rule for the host',
      async () => (await ingressHosts()).includes(`${project}.shop.test`),
      60_000,
      200,
    );

    const unassigned = await call(api.url, 'DELETE', `${p}/domains/shop/assign`, { token });
    expect(unassigned.status, unassigned.text).toBe(200);
    expect(unassigned.body).toMatchObject({ domain_id: 'shop', assigned: false });
    await waitFor(
      'Ingress rule removed',
      async () => !(await ingressHosts()).includes(`${project}.shop.test`),
      60_000,
      200,
    );

    const after = await call(api.url, 'GET', `${p}/domains/shop`, { token });
    expect(after.status).toBe(200);
    expect(after.body).toMatchObject({ hostname: `${project}.shop.test`, assigned: false });
    expect((await call(api.url, 'DELETE', `${p}/domains/shop/assign`, { token })).status).toBe(200);
  });
});
