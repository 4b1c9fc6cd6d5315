/**
 * The operator against the real kube-apiserver (+ kube-controller-manager for Deployments and garbage
 * collection): CRD validation, App → Deployment + Service, readiness, updates, drift, zero writes
 * when steady, deletion.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../../src/apis/v1alpha1/types.ts';
import type { KubeClient } from '../../../src/shared/kube/client.ts';
import {
  type Deployment,
  type KubeEvent,
  type KubeObject,
  Resources,
  type Service,
} from '../../../src/shared/kube/objects.ts';
import { createTestNamespace, testKubeConfig } from '../../harness/kube.ts';
import {
  applyCrds,
  eventually,
  kubectl,
  reconcileCount,
  type TestOperator,
  testClient,
  testOperator,
} from './helpers.ts';

const kc = testKubeConfig();
let client: KubeClient;
let ns: string;
let op: TestOperator;

const app = (name: string, spec: App['spec']) => ({
  apiVersion: 'apphost.dev/v1alpha1',
  kind: 'App',
  metadata: { name, namespace: ns },
  spec,
});
const get = (type: (typeof Resources)[keyof typeof Resources], name: string) =>
  client.get<KubeObject>(type, { namespace: ns, name });
const getApp = (name: string) => client.get<App>(Resources.App, { namespace: ns, name });
const getDep = (name: string) => client.get<Deployment>(Resources.Deployment, { namespace: ns, name });
const getSvc = (name: string) => client.get<Service>(Resources.Service, { namespace: ns, name });
const readyOf = (a: App | undefined) => a?.status?.conditions?.find((c) => c.type === 'Ready');

/** What a kubelet would do: mark every pod of the App running and ready. */
async function makePodsReady(appName: string) {
  const core = kc.makeApiClient(CoreV1Api);
  const pods = await core.listNamespacedPod({ namespace: ns, labelSelector: `apphost.dev/app=${appName}` });
  if (pods.items.length === 0) return false;
  const now = new Date().toISOString();
  for (const pod of pods.items) {
    await client.mergePatch(
      { apiVersion: 'v1', kind: 'Pod', plural: 'pods', namespaced: true },
      { namespace: ns, name: pod.metadata?.name ?? '' },
      {
        status: {
          phase: 'Running',
          conditions: [
            { type: 'Ready', status: 'True', lastTransitionTime: now },
            { type: 'ContainersReady', status: 'True', lastTransitionTime: now },
          ],
        },
      },
      'status',
    );
  }
  return true;
}

beforeAll(async () => {
  await applyCrds();
  client = testClient(kc);
  ns = await createTestNamespace(kc, 'op-app', { 'apphost.dev/project': 'proj-op-app' });
  op = testOperator(kc, ns);
  await op.operator.start();
  await eventually('operator leads', async () => op.operator.isLeader());
});

afterAll(async () => {
  await op?.operator.stop();
});

describe('CRD validation', () => {
  it.each([
    [
      'custom runtime without image and port',
      app('bad-custom', { runtime: 'custom' }),
      /runtime 'custom' needs spec\.image .* and spec\.port/,
    ],
    [
      'cortex runtime without image or code',
      app('bad-cortex', { runtime: 'cortex' }),
      /runtime 'cortex' needs spec\.image .*, spec\.code\.configMapRef .* or spec\.code\.artifacts/,
    ],
    [
      'minReplicas above maxReplicas',
      app('bad-scaling', { runtime: 'cortex', image: 'x/y:1', scaling: { minReplicas: 5, maxReplicas: 2 } }),
      /minReplicas must not be greater than spec\.scaling\.maxReplicas/,
    ],
    [
      'a target utilization over 100 %',
      app('bad-target', { runtime: 'cortex', image: 'x/y:1', scaling: { targetUtilization: 120 } }),
      /spec\.scaling\.targetUtilization.*less than or equal to 100/,
    ],
    [
      'a negative cooldown',
      app('bad-cooldown', { runtime: 'cortex', image: 'x/y:1', scaling: { cooldownSeconds: -1 } }),
      /spec\.scaling\.cooldownSeconds.*greater than or equal to 0/,
    ],
    [
      'a scaling buffer as large as maxReplicas',
      app('bad-buffer', { runtime: 'cortex', image: 'x/y:1', scaling: { maxReplicas: 2, scalingBuffer: 2 } }),
      /spec\.scaling\.scalingBuffer must be less than spec\.scaling\.maxReplicas/,
    ],
    [
      'code.artifacts with a digest that is not a sha256',
      app('bad-digest', {
        runtime: 'cortex',
        code: { artifacts: { bundle: 'sha256:abc' as `sha256:${string}` } },
      }),
      /spec\.code\.artifacts\.bundle.*should match/,
    ],
    [
      'both code.configMapRef and code.artifacts',
      app('bad-code', {
        runtime: 'cortex',
        code: { configMapRef: { name: 'c' }, artifacts: { bundle: `sha256:${'a'.repeat(64)}` } },
      }),
      /spec\.code has either configMapRef or artifacts, not both/,
    ],
    [
      'responseGracePeriodSeconds above 12 h',
      app('bad-grace', { runtime: 'cortex', image: 'x/y:1', responseGracePeriodSeconds: 50_000 }),
      /responseGracePeriodSeconds.*less than or equal to 43200/,
    ],
    [
      'a hostname that is not a DNS name',
      {
        apiVersion: 'apphost.dev/v1alpha1',
        kind: 'DomainAssignment',
        metadata: { name: 'bad-host', namespace: '' },
        spec: { hostname: 'https://Example.com/x' },
      },
      /hostname must be a lowercase DNS name/,
    ],
  ])('rejects %s with a message saying what to fix', async (_name, body, message) => {
    const obj = { ...body, metadata: { ...body.metadata, namespace: ns } } as KubeObject;
    const type = obj.kind === 'App' ? Resources.App : Resources.DomainAssignment;
    await expect(client.create(type, obj)).rejects.toThrow(message);
  });

  it('fills in defaults', async () => {
    const created = await client.create(
      Resources.App,
      app('defaults', { runtime: 'cortex', image: 'x/y:1', scaling: {} }) as App,
    );
    expect(created.spec.responseGracePeriodSeconds).toBe(900);
    expect(created.spec.scaling).toEqual({
      minReplicas: 1,
      replicaConcurrency: 100,
      targetUtilization: 70,
      scalingBuffer: 0,
      cooldownSeconds: 60,
    });
    await client.delete(Resources.App, { namespace: ns, name: 'defaults' });
  });
});

describe('App → Deployment and Service', () => {
  it('creates both with the expected spec, owned by the App', async () => {
    await client.create(
      Resources.App,
      app('hello', {
        runtime: 'cortex',
        code: { configMapRef: { name: 'hello-code' } },
        env: [{ name: 'GREETING', value: 'hi' }],
        envFromSecrets: ['hello-secrets'],
        resources: { cpu: '0.5', memory: '256Mi', gpu: 1 },
        scaling: { minReplicas: 2, maxReplicas: 4 },
        responseGracePeriodSeconds: 120,
      }) as KubeObject,
    );
    await eventually('Deployment and Service', async () =>
      Boolean((await getDep('hello')) && (await getSvc('hello'))),
    );
    const owner = await getApp('hello');
    const dep = (await getDep('hello'))!;
    expect(dep.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'App', name: 'hello', uid: owner?.metadata.uid, controller: true }),
    ]);
    expect(dep.metadata.labels).toMatchObject({
      'app.kubernetes.io/name': 'hello',
      'app.kubernetes.io/managed-by': 'apphost-operator',
      'app.kubernetes.io/part-of': 'apphost',
      'apphost.dev/app': 'hello',
    });
    expect(dep.spec.replicas).toBe(2);
    const pod = dep.spec.template.spec!;
    // preStop pause 5 + responseGracePeriodSeconds 120 + margin 10.
    expect(pod.terminationGracePeriodSeconds).toBe(135);
    const c = pod.containers[0]!;
    expect(c.lifecycle).toEqual({ preStop: { sleep: { seconds: 5 } } });
    expect(c.image).toBe('example.invalid/runtime-python:test');
    expect(c.command).toEqual([
      'python',
      '-m',
      'apphost_runtime',
      '--app-dir',
      '/app',
      '--port',
      '8080',
      '--grace-seconds',
      '120',
    ]);
    expect(c.ports).toEqual([{ name: 'http', containerPort: 8080, protocol: 'TCP' }]);
    expect(c.readinessProbe?.httpGet).toMatchObject({ path: '/ready', port: 'http' });
    expect(c.livenessProbe?.httpGet).toMatchObject({ path: '/health', port: 'http' });
    expect(c.resources).toEqual({
      requests: { cpu: '500m', memory: '256Mi' },
      limits: { memory: '256Mi', 'nvidia.com/gpu': '1' },
    });
    expect(c.env).toContainEqual({ name: 'GREETING', value: 'hi' });
    expect(c.envFrom).toEqual([{ secretRef: { name: 'hello-secrets' } }]);
    expect(c.volumeMounts).toEqual([
      { name: 'code', mountPath: '/app', readOnly: true },
      { name: 'tmp', mountPath: '/tmp' },
    ]);
    expect(pod.volumes).toEqual([
      expect.objectContaining({ name: 'code', configMap: expect.objectContaining({ name: 'hello-code' }) }),
      { name: 'tmp', emptyDir: {} },
    ]);
    expect(c.startupProbe).toMatchObject({ httpGet: { path: '/ready', port: 'http' }, periodSeconds: 1 });
    expect(c.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });

    const svc = (await getSvc('hello'))!;
    expect(svc.spec.selector).toEqual({ 'apphost.dev/app': 'hello' });
    expect(svc.spec.ports).toEqual([
      expect.objectContaining({ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }),
    ]);
    expect(svc.metadata.ownerReferences?.[0]?.uid).toBe(owner?.metadata.uid);

    await eventually('Events on the App for what the operator did', async () => {
      const events = await client.list<KubeEvent>(Resources.Event, { namespace: ns });
      const mine = events.items.filter(
        (e) => e.involvedObject?.kind === 'App' && e.involvedObject?.name === 'hello',
      );
      return mine.some(
        (e) =>
          e.reason === 'Applied' &&
          e.message === 'created Deployment hello and Service hello' &&
          e.source?.component === 'apphost-operator',
      );
    });
    await eventually('status with a not-ready reason and no URL before the App has been Ready', async () => {
      const a = await getApp('hello');
      return Boolean(readyOf(a)) && readyOf(a)?.status !== 'True' && a?.status?.url === undefined;
    });
  });

  it('reports Ready=True once the replicas are ready', async () => {
    await eventually('pods created by the ReplicaSet', async () => makePodsReady('hello'));
    await eventually('App Ready=True', async () => {
      await makePodsReady('hello');
      const a = await getApp('hello');
      return readyOf(a)?.status === 'True' && a?.status?.readyReplicas === 2;
    });
    const a = await getApp('hello');
    expect(a?.status?.observedGeneration).toBe(a?.metadata.generation);
    expect(a?.status?.url).toBe(`http://hello.${ns}.svc.cluster.local`);
  });

  it('kubectl shows READY, URL, DESIRED, REPLICAS, AGE, and finds Apps by short name and category', async () => {
    // What the autoscaler writes (the operator here runs without it).
    await client.mergePatch(
      Resources.App,
      { namespace: ns, name: 'hello' },
      { status: { desiredReplicas: 2 } },
      'status',
    );
    const { stdout } = await kubectl('get', 'apps.apphost.dev', '-n', ns, 'hello');
    const [header, row] = stdout.trim().split('\n');
    expect(header?.split(/\s+/)).toEqual(['NAME', 'READY', 'URL', 'DESIRED', 'REPLICAS', 'AGE']);
    expect(row?.split(/\s+/).slice(0, 5)).toEqual([
      'hello',
      'True',
      `http://hello.${ns}.svc.cluster.local`,
      '2',
      '2',
    ]);
    expect((await kubectl('get', 'ahapp', '-n', ns, '-o', 'name')).stdout).toContain('app.apphost.dev/hello');
    expect((await kubectl('get', 'apphost', '-n', ns, '-o', 'name')).stdout).toContain(
      'app.apphost.dev/hello',
    );
  });

  it('follows a change of the App', async () => {
    await client.mergePatch(
      Resources.App,
      { namespace: ns, name: 'hello' },
      {
        spec: {
          image: 'example.invalid/hello:2',
          // The autoscaler asked for 2 (above); a lowered maxReplicas caps it at once.
          scaling: { minReplicas: 1, maxReplicas: 1 },
          env: null,
          resources: { gpu: null },
        },
      },
    );
    await eventually('Deployment updated', async () => {
      const dep = await getDep('hello');
      const c = dep?.spec.template.spec?.containers[0];
      return (
        dep?.spec.replicas === 1 &&
        c?.image === 'example.invalid/hello:2' &&
        !c.env?.some((e) => e.name === 'GREETING') &&
        c.resources?.limits?.['nvidia.com/gpu'] === undefined
      );
    });
  });

  it('restores an owned object that is deleted or edited (drift)', async () => {
    const before = (await getDep('hello'))!;
    await client.delete(Resources.Deployment, { namespace: ns, name: 'hello' });
    await eventually('Deployment recreated', async () => {
      const d = await getDep('hello');
      return Boolean(d && d.metadata.uid !== before.metadata.uid);
    });
    await client.mergePatch(
      Resources.Service,
      { namespace: ns, name: 'hello' },
      {
        spec: { ports: [{ name: 'http', port: 80, targetPort: 9999, protocol: 'TCP' }] },
      },
    );
    await eventually('Service port restored', async () => {
      const s = await getSvc('hello');
      return s?.spec.ports?.[0]?.targetPort === 8080;
    });
  });

  it('makes no writes while nothing changes', { timeout: 120_000 }, async () => {
    // Settle: let the App's status catch up with the restored Deployment.
    await eventually('status settled', async () => {
      const w = await op.writes();
      await new Promise((r) => setTimeout(r, 2 * op.settings.resyncPeriodMs));
      return (await op.writes()) === w;
    });
    const versions = async () =>
      Promise.all(
        [Resources.App, Resources.Deployment, Resources.Service].map(
          async (t) => (await get(t, 'hello'))?.metadata.resourceVersion,
        ),
      );
    const writesBefore = await op.writes();
    const rvBefore = await versions();
    const resyncsBefore = await reconcileCount(op);
    // Three resync periods: every object is reconciled again at least twice.
    await new Promise((r) => setTimeout(r, 3 * op.settings.resyncPeriodMs + 500));
    expect(await reconcileCount(op)).toBeGreaterThan(resyncsBefore + 1);
    expect(await op.writes()).toBe(writesBefore);
    expect(await versions()).toEqual(rvBefore);
  });

  it('custom runtime: entrypoint, port and probe paths', async () => {
    await client.create(
      Resources.App,
      app('custom', {
        runtime: 'custom',
        image: 'example.invalid/custom:1',
        port: 9000,
        entrypoint: ['/bin/server', '--flag'],
        healthcheckPath: '/livez',
        readinessPath: '/readyz',
      }) as KubeObject,
    );
    await eventually('custom Deployment', async () => Boolean(await getSvc('custom')));
    const c = (await getDep('custom'))!.spec.template.spec!.containers[0]!;
    expect(c.command).toEqual(['/bin/server', '--flag']);
    expect(c.ports?.[0]?.containerPort).toBe(9000);
    expect(c.livenessProbe?.httpGet?.path).toBe('/livez');
    expect(c.readinessProbe?.httpGet?.path).toBe('/readyz');
    expect((await getSvc('custom'))!.spec.ports?.[0]?.targetPort).toBe(9000);
  });

  it('a deployed App (code.artifacts): its pods fetch the bundle and dependencies in an init container', async () => {
    const bundle = `sha256:${'1'.repeat(64)}` as const;
    const dependencies = `sha256:${'2'.repeat(64)}` as const;
    await client.create(
      Resources.App,
      app('deployed', { runtime: 'cortex', code: { artifacts: { bundle, dependencies } } }) as KubeObject,
    );
    await eventually('deployed Deployment', async () => Boolean(await getDep('deployed')));
    const spec = (await getDep('deployed'))!.spec.template.spec!;
    expect(spec.initContainers?.map((c) => [c.name, c.args?.slice(0, 3)])).toEqual([
      ['fetch-code', ['fetch-artifacts', '--bundle', bundle]],
    ]);
    expect(spec.initContainers?.[0]?.args).toContain(dependencies);
    expect(spec.containers[0]?.command).toContain('--deps-dir');
    expect(spec.volumes?.map((v) => v.name).sort()).toEqual(['code', 'deps', 'tmp']);
  });

  it('a broken App (name taken by a foreign Deployment) is reported and does not hold up others', async () => {
    await client.create(Resources.Deployment, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'taken', namespace: ns },
      spec: {
        replicas: 0,
        selector: { matchLabels: { x: 'taken' } },
        template: {
          metadata: { labels: { x: 'taken' } },
          spec: { containers: [{ name: 'c', image: 'example.invalid/other:1' }] },
        },
      },
    });
    await client.create(Resources.App, app('taken', { runtime: 'cortex', image: 'x/y:1' }) as App);
    await client.create(Resources.App, app('fine', { runtime: 'cortex', image: 'x/y:1' }) as App);
    await eventually('fine reconciled', async () => Boolean(await getSvc('fine')));
    await eventually(
      'taken reports the conflict',
      async () => readyOf(await getApp('taken'))?.reason === 'NameConflict',
    );
    expect(readyOf(await getApp('taken'))).toMatchObject({
      status: 'False',
      message: expect.stringMatching(
        /a Deployment named "taken" already exists and is not managed by this App/,
      ),
    });
    // The foreign Deployment is untouched.
    const foreign = await getDep('taken');
    expect(foreign?.metadata.ownerReferences).toBeUndefined();
    expect(foreign?.spec.template.spec?.containers[0]?.image).toBe('example.invalid/other:1');
  });

  // The garbage collector rediscovers new resource types (our CRDs) only every 30 s: a generous bound.
  it('deleting the App garbage-collects its Deployment and Service', { timeout: 150_000 }, async () => {
    await client.delete(Resources.App, { namespace: ns, name: 'hello' });
    await eventually(
      'owned objects gone',
      async () => !(await getDep('hello')) && !(await getSvc('hello')),
      120_000,
    );
  });
});
