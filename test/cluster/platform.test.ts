/**
 * apphost as a platform team installs it (helm install, global-setup.ts) and as a user calls it:
 * through the cluster's ingress, with the Host a user would send, to pods running the images
 * `make images` built.
 */
import { join } from 'node:path';
import { AppsV1Api, type KubeConfig } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../harness/process.ts';
import {
  API_HOST,
  clusterKubeConfig,
  createProject,
  ingressRequest,
  kubectl,
  kubectlApply,
  MANAGEMENT_HOST,
  PLATFORM_NAMESPACE,
} from './fixture.ts';
import { REPO } from './platform.ts';

/** Bound on an App becoming Ready (image present: pod start + runtime import). */
const APP_READY_TIMEOUT_MS = 120_000;

/** A service-account token, made the way docs/install.md says: the CLI inside the management pod. */
async function serviceAccountToken(project: string): Promise<string> {
  const out = await kubectl(
    '-n',
    PLATFORM_NAMESPACE,
    'exec',
    'deploy/apphost-management',
    '--',
    'node',
    'dist/cli/main.js',
    'create-service-account',
    '--project',
    project,
    '--name',
    'e2e',
    '--expires',
    new Date(Date.now() + 2 * 86_400_000).toISOString().slice(0, 10),
  );
  return JSON.parse(out.trim().split('\n').at(-1) as string).token;
}

async function runToken(project: string, saToken: string): Promise<string> {
  const res = await ingressRequest(MANAGEMENT_HOST, `/v2/projects/${project}/run-tokens`, {
    method: 'POST',
    headers: { authorization: `Bearer ${saToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ expires_at: new Date(Date.now() + 86_400_000).toISOString() }),
  });
  const text = await res.body.text();
  expect(res.statusCode, text).toBe(201);
  return (JSON.parse(text) as { token: string }).token;
}

/** An App whose code comes from a ConfigMap, as the README's "Cluster install" shows. */
async function deployExampleApp(project: string, app: string): Promise<void> {
  await kubectl(
    '-n',
    project,
    'create',
    'configmap',
    `${app}-code`,
    `--from-file=main.py=${join(REPO, 'examples', 'apps', app, 'main.py')}`,
  );
  await kubectlApply(
    project,
    `apiVersion: apphost.dev/v1alpha1
kind: App
metadata: {name: ${app}}
spec: {runtime: cortex, code: {configMapRef: {name: ${app}-code}}}
`,
  );
}

describe('apphost installed with helm on a real cluster', () => {
  let kc: KubeConfig;
  let project: string;
  let token: string;

  beforeAll(async () => {
    kc = clusterKubeConfig();
    project = await createProject(kc);
    token = await runToken(project, await serviceAccountToken(project));
  });

  it('runs every platform piece Ready, with the chart probes', async () => {
    const apps = kc.makeApiClient(AppsV1Api);
    const deployments = await apps.listNamespacedDeployment({ namespace: PLATFORM_NAMESPACE });
    const names = deployments.items.map((d) => d.metadata?.name).sort();
    expect(names).toEqual(['apphost-gateway', 'apphost-management', 'apphost-operator', 'apphost-webhooks']);
    for (const d of deployments.items) {
      expect(d.status?.readyReplicas, d.metadata?.name).toBe(d.spec?.replicas);
      expect(d.spec?.template.spec?.containers[0]?.readinessProbe?.httpGet?.path).toBe('/readyz');
    }
    const nats = await apps.readNamespacedStatefulSet({
      name: 'apphost-nats',
      namespace: PLATFORM_NAMESPACE,
    });
    expect(nats.status?.readyReplicas).toBe(1);
  });

  it('serves a sync call of an App through the ingress', async () => {
    const t0 = Date.now();
    await deployExampleApp(project, 'hello');
    await kubectl(
      '-n',
      project,
      'wait',
      '--for=condition=Ready',
      'app/hello',
      `--timeout=${APP_READY_TIMEOUT_MS / 1000}s`,
    );
    let status = 0;
    let body = '';
    await waitFor(
      'first 200 from hello through the ingress',
      async () => {
        const res = await ingressRequest(API_HOST, `/v4/${project}/hello/run`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'cluster' }),
        });
        status = res.statusCode;
        body = await res.body.text();
        return status === 200;
      },
      APP_READY_TIMEOUT_MS,
      250,
    ).catch((err) => {
      throw new Error(`${err}; last answer ${status} ${body}`);
    });
    process.stderr.write(
      `cluster suite: App created → first 200 through the ingress ${Date.now() - t0} ms\n`,
    );
    expect(JSON.parse(body)).toEqual({ message: 'hello cluster' });
  });
});
