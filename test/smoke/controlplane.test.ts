import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ApiextensionsV1Api, AppsV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { describe, expect, inject, it } from 'vitest';
import { binaryPath } from '../harness/binaries.ts';
import { createTestNamespace, testKubeConfig } from '../harness/kube.ts';
import { waitFor } from '../harness/process.ts';

const exec = promisify(execFile);

describe('test control plane', () => {
  const kc = testKubeConfig();

  it('creates a CustomResourceDefinition and serves objects of it', async () => {
    const ext = kc.makeApiClient(ApiextensionsV1Api);
    await ext.createCustomResourceDefinition({
      body: {
        metadata: { name: 'widgets.smoke.apphost.dev' },
        spec: {
          group: 'smoke.apphost.dev',
          scope: 'Namespaced',
          names: { plural: 'widgets', singular: 'widget', kind: 'Widget' },
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: {
                    spec: { type: 'object', properties: { size: { type: 'integer', minimum: 1 } } },
                  },
                },
              },
            },
          ],
        },
      },
    });
    const read = await ext.readCustomResourceDefinition({ name: 'widgets.smoke.apphost.dev' });
    expect(read.spec.names.kind).toBe('Widget');

    const ns = await createTestNamespace(kc, 'smoke-crd');
    const objects = kc.makeApiClient(CustomObjectsApi);
    const body = {
      apiVersion: 'smoke.apphost.dev/v1',
      kind: 'Widget',
      metadata: { name: 'w1' },
      spec: { size: 3 },
    };
    // The CRD is served a moment after it is created (Established).
    await waitFor(
      'Widget CRD established',
      async () => {
        await objects.createNamespacedCustomObject({
          group: 'smoke.apphost.dev',
          version: 'v1',
          namespace: ns,
          plural: 'widgets',
          body,
        });
        return true;
      },
      30_000,
      250,
    );
    const got = (await objects.getNamespacedCustomObject({
      group: 'smoke.apphost.dev',
      version: 'v1',
      namespace: ns,
      plural: 'widgets',
      name: 'w1',
    })) as { spec: { size: number } };
    expect(got.spec.size).toBe(3);
    // The schema is enforced by the real apiserver.
    await expect(
      objects.createNamespacedCustomObject({
        group: 'smoke.apphost.dev',
        version: 'v1',
        namespace: ns,
        plural: 'widgets',
        body: { ...body, metadata: { name: 'w2' }, spec: { size: 0 } },
      }),
    ).rejects.toThrow(/spec.size/);
  });

  it('creates a Deployment, and kube-controller-manager makes its ReplicaSet', async () => {
    const ns = await createTestNamespace(kc, 'smoke-deploy');
    const apps = kc.makeApiClient(AppsV1Api);
    await apps.createNamespacedDeployment({
      namespace: ns,
      body: {
        metadata: { name: 'web' },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: { containers: [{ name: 'web', image: 'example.invalid/web:1' }] },
          },
        },
      },
    });
    const read = await apps.readNamespacedDeployment({ namespace: ns, name: 'web' });
    expect(read.spec?.template.spec?.containers[0]?.image).toBe('example.invalid/web:1');
    await waitFor(
      'ReplicaSet for Deployment web',
      async () => (await apps.listNamespacedReplicaSet({ namespace: ns })).items.length === 1,
      30_000,
      250,
    );
  });

  it('kubectl talks to it', async () => {
    const { stdout } = await exec(binaryPath('kubectl'), [
      '--kubeconfig',
      inject('kubeconfigPath'),
      'version',
      '-o',
      'json',
    ]);
    const v = JSON.parse(stdout) as {
      clientVersion: { gitVersion: string };
      serverVersion: { gitVersion: string };
    };
    expect(v.serverVersion.gitVersion).toMatch(/^v1\.\d+\.\d+/);
    expect(v.clientVersion.gitVersion).toMatch(/^v1\.\d+\.\d+/);
  });

  it('helm talks to it', async () => {
    const helm = binaryPath('helm');
    const { stdout } = await exec(helm, ['version', '--short']);
    expect(stdout).toMatch(/^v3\.\d+\.\d+/);
    const list = await exec(helm, [
      'list',
      '--all-namespaces',
      '-o',
      'json',
      '--kubeconfig',
      inject('kubeconfigPath'),
    ]);
    expect(JSON.parse(list.stdout)).toEqual([]);
  });
});
