import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DOMAIN_ASSIGNMENT_PLURAL, GROUP, VERSION } from '../../../src/apis/v1alpha1/types.ts';
import { createKubeStore } from '../../../src/management/store/kube.ts';
import { createMemoryStore } from '../../../src/management/store/memory.ts';
import { applyProjectCrds } from '../../harness/crds.ts';
import { testKubeConfig } from '../../harness/kube.ts';
import {
  createAppCr,
  createNamespace,
  createProjectNamespace,
  deleteNamespaces,
  uniqueId,
} from './fixtures.ts';
import { type ContractEnv, storeContract } from './store-contract.ts';

describe('memory store', () => {
  let env: ContractEnv;
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mgmt-store-'));
    const store = createMemoryStore({
      keysFile: join(dir, 'keys', 'run-token-keys.json'),
      projects: { p1: ['hello'], p2: [] },
    });
    env = {
      store,
      projectId: 'p1',
      otherProjectId: 'p2',
      appName: 'hello',
      rawAssignedApp: async (p, d) => (await store.getDomain(p, d))?.appName,
    };
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  storeContract('memory', () => env);

  it('keeps run-token keys in a 0600 file that a second store (the local gateway) reads', async () => {
    const file = join(dir, 'keys', 'run-token-keys.json');
    const keys = await env.store.getRunTokenKeys();
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual(keys);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const again = createMemoryStore({ keysFile: file });
    expect((await again.getRunTokenKeys()).keys[0]?.kid).toBe(keys.keys[0]?.kid);
  });
});

const haveKube = Boolean(inject('kubeconfigYaml'));

describe.skipIf(!haveKube)('kube store (real kube-apiserver)', () => {
  let kc: KubeConfig;
  let env: ContractEnv;
  const namespaces: string[] = [];
  beforeAll(async () => {
    kc = testKubeConfig();
    await applyProjectCrds();
    const p1 = uniqueId('ks');
    const p2 = uniqueId('ks');
    const ns1 = await createProjectNamespace(kc, p1);
    const ns2 = await createProjectNamespace(kc, p2);
    const keysNs = uniqueId('mgmt-keys');
    await createNamespace(kc, keysNs);
    namespaces.push(ns1, ns2, keysNs);
    await createAppCr(kc, ns1, 'hello');
    const custom = kc.makeApiClient(CustomObjectsApi);
    env = {
      store: createKubeStore(kc, { keysNamespace: keysNs }),
      projectId: p1,
      otherProjectId: p2,
      appName: 'hello',
      rawAssignedApp: async (p, d) => {
        const ns = p === p1 ? ns1 : ns2;
        const cr = (await custom.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: ns,
          plural: DOMAIN_ASSIGNMENT_PLURAL,
          name: d,
        })) as { spec: { appName?: string } };
        return cr.spec.appName || undefined;
      },
    };
  });
  afterAll(async () => {
    if (kc) await deleteNamespaces(kc, namespaces);
  });
  storeContract('kubernetes', () => env);
});
