/** The same HTTP suites as api-memory.test.ts, with the Kubernetes store on the real kube-apiserver. */
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, inject } from 'vitest';
import { DOMAIN_ASSIGNMENT_PLURAL, GROUP, VERSION } from '../../../src/apis/v1alpha1/types.ts';
import { createAppLogs } from '../../../src/local/app-logs.ts';
import { createServiceAccount } from '../../../src/management/service-accounts.ts';
import { createKubeStore } from '../../../src/management/store/kube.ts';
import { applyProjectCrds } from '../../harness/crds.ts';
import { testKubeConfig } from '../../harness/kube.ts';
import { type ApiEnv, apiSuite, seedRuns } from './api-contract.ts';
import { conformanceSuite } from './conformance.ts';
import {
  createAppCr,
  createNamespace,
  createProjectNamespace,
  deleteNamespaces,
  memoryDeliveries,
  memoryRuns,
  uniqueId,
} from './fixtures.ts';
import { startApi } from './server.ts';

const haveKube = Boolean(inject('kubeconfigYaml'));

describe.skipIf(!haveKube)('management API on the real kube-apiserver', () => {
  let env: ApiEnv;
  let kc: KubeConfig;
  const namespaces: string[] = [];
  beforeAll(async () => {
    kc = testKubeConfig();
    await applyProjectCrds();
    const alpha = uniqueId('ka');
    const beta = uniqueId('kb');
    const nsA = await createProjectNamespace(kc, alpha);
    const nsB = await createProjectNamespace(kc, beta);
    const keysNs = uniqueId('mgmt-keys');
    await createNamespace(kc, keysNs);
    namespaces.push(nsA, nsB, keysNs);
    await createAppCr(kc, nsA, 'hello');
    const store = createKubeStore(kc, { keysNamespace: keysNs });
    const seeded = seedRuns(alpha, 'hello');
    const api = await startApi({
      store,
      runs: memoryRuns(seeded.runs),
      deliveries: memoryDeliveries(seeded.deliveries),
      logs: createAppLogs(alpha),
    });
    const far = new Date('2099-01-01T00:00:00Z');
    const custom = kc.makeApiClient(CustomObjectsApi);
    env = {
      api,
      store,
      projectId: alpha,
      otherProjectId: beta,
      appName: 'hello',
      token: (await createServiceAccount(store, alpha, 'admin', far)).token,
      otherToken: (await createServiceAccount(store, beta, 'admin', far)).token,
      runs: seeded.runs,
      deliveries: seeded.deliveries,
      rawAssignedApp: async (d) => {
        const cr = (await custom.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: nsA,
          plural: DOMAIN_ASSIGNMENT_PLURAL,
          name: d,
        })) as { spec: { appName?: string } };
        return cr.spec.appName || undefined;
      },
      authCacheSeconds: 3,
    };
  });
  afterAll(async () => {
    await env?.api.close();
    if (kc) await deleteNamespaces(kc, namespaces);
  });

  apiSuite('kubernetes store', () => env);
  conformanceSuite('kubernetes store', () => env);
});
