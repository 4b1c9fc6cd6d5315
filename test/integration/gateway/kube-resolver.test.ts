import { CoreV1Api, CustomObjectsApi, DiscoveryV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  APP_PLURAL,
  type App,
  DOMAIN_ASSIGNMENT_PLURAL,
  type DomainAssignment,
  GROUP,
  PROJECT_LABEL,
  VERSION,
} from '../../../src/apis/v1alpha1/types.ts';
import { gatewayKubeReader } from '../../../src/gateway/kube-client.ts';
import { DEFAULT_GATEWAY_KUBE_SETTINGS } from '../../../src/gateway/kube-settings.ts';
import { createFunctionsCache, type FunctionsCache } from '../../../src/gateway/resolver/functions.ts';
import { createKubeAppResolver, type KubeAppResolver } from '../../../src/gateway/resolver/kube.ts';
import type { ResolvedApp } from '../../../src/shared/contracts/seams.ts';
import type { ClosableKubeReader } from '../../../src/shared/kube/reader.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { applyProjectCrds } from '../../harness/crds.ts';
import { createTestNamespace, testKubeAccess, testKubeConfig } from '../../harness/kube.ts';
import { waitFor } from '../../harness/process.ts';
import { startTcpRelay } from '../../harness/tcp-relay.ts';
import { closeServer, listen } from './helpers.ts';

const WATCH_WAIT_MS = 30_000;
const kc = testKubeConfig();
const custom = kc.makeApiClient(CustomObjectsApi);
let client: ClosableKubeReader;
let resolver: KubeAppResolver;
let fnResolver: KubeAppResolver;
let functions: FunctionsCache;
let fnServer: Awaited<ReturnType<typeof listen>>;
let ns: string;
const project = `res-${Date.now().toString(36)}`;

beforeAll(async () => {
  await applyProjectCrds();
  ns = await createTestNamespace(kc, 'gw-res', { [PROJECT_LABEL]: project });
  fnServer = await listen((req, res) => {
    if (req.url === '/functions') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"functions":[{"name":"echo"}]}');
    } else res.writeHead(404).end();
  });
  functions = createFunctionsCache({ log: silentLogger(), timeoutMs: 2_000, ttlMs: 60_000 });
  client = gatewayKubeReader(await testKubeAccess(), DEFAULT_GATEWAY_KUBE_SETTINGS);
  resolver = createKubeAppResolver({ client, log: silentLogger(), functions });
  fnResolver = createKubeAppResolver({
    client,
    log: silentLogger(),
    functions,
    upstreamFor: () => fnServer.url,
  });
  await fnResolver.start();
  await resolver.start();
});

afterAll(async () => {
  await resolver?.stop();
  await fnResolver?.stop();
  await functions?.close();
  await client?.close();
  if (fnServer) await closeServer(fnServer.server);
  if (ns)
    await kc
      .makeApiClient(CoreV1Api)
      .deleteNamespace({ name: ns })
      .catch(() => undefined);
});

it('resolves apps of a project namespace, their readiness and grace period, and custom domains', async () => {
  const app: App = {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'App',
    metadata: { name: 'hello', namespace: ns },
    spec: { runtime: 'cortex', image: 'example/hello:1', responseGracePeriodSeconds: 1200 },
  };
  await custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: APP_PLURAL,
    body: app,
  });
  await waitFor('app visible', async () => !!(await resolver.resolve(project, 'hello')), WATCH_WAIT_MS);
  const seen = await resolver.resolve(project, 'hello');
  expect(seen).toMatchObject({
    projectId: project,
    appName: 'hello',
    runtime: 'cortex',
    upstream: `http://hello.${ns}.svc.cluster.local:80`,
    ready: false,
    gracePeriodSeconds: 1200,
    scaling: { minReplicas: 1, maxReplicas: 10, replicaConcurrency: 100 },
  });
  expect(await resolver.resolve('another-project', 'hello')).toBeUndefined();

  const current = (await custom.getNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: APP_PLURAL,
    name: 'hello',
  })) as App;
  await custom.replaceNamespacedCustomObjectStatus({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: APP_PLURAL,
    name: 'hello',
    body: {
      ...current,
      status: {
        conditions: [
          { type: 'Ready', status: 'True', reason: 'Ready', lastTransitionTime: new Date().toISOString() },
        ],
      },
    },
  });
  await waitFor(
    'app ready',
    async () => (await resolver.resolve(project, 'hello'))?.ready === true,
    WATCH_WAIT_MS,
  );

  const domain: DomainAssignment = {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'DomainAssignment',
    metadata: { name: 'd1', namespace: ns },
    spec: { hostname: 'api.resolver-test.example', appName: 'hello' },
  };
  await custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: DOMAIN_ASSIGNMENT_PLURAL,
    body: domain,
  });
  await waitFor(
    'host assigned',
    async () => !!(await resolver.resolveHost('api.resolver-test.example')),
    WATCH_WAIT_MS,
  );
  expect(await resolver.resolveHost('API.resolver-test.example')).toEqual({
    projectId: project,
    appName: 'hello',
  });

  const d = (await custom.getNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: DOMAIN_ASSIGNMENT_PLURAL,
    name: 'd1',
  })) as DomainAssignment;
  await custom.replaceNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: DOMAIN_ASSIGNMENT_PLURAL,
    name: 'd1',
    body: { ...d, spec: { hostname: d.spec.hostname, appName: '' } },
  });
  await waitFor(
    'host unassigned',
    async () => !(await resolver.resolveHost('api.resolver-test.example')),
    WATCH_WAIT_MS,
  );

  await custom.deleteNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: APP_PLURAL,
    name: 'hello',
  });
  await waitFor('app gone', async () => !(await resolver.resolve(project, 'hello')), WATCH_WAIT_MS);
});

it('reports each app’s ready pod addresses from its EndpointSlices, and why it cannot start', async () => {
  const replicas = new Map<string, string[]>();
  const failures = new Map<string, string | undefined>();
  resolver.watchReplicas?.({
    setReplicas: (p, a, list) =>
      replicas.set(
        `${p}/${a}`,
        list.map((r) => r.id),
      ),
    setStartFailure: (p, a, f) => failures.set(`${p}/${a}`, f ? `${f.reason}: ${f.message}` : undefined),
  });
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  // What the EndpointSlice controller writes for an App's Service (labels copied from the Service).
  const slice = (name: string, ready: boolean[]) => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name,
      namespace: ns,
      labels: {
        'kubernetes.io/service-name': 'web',
        'app.kubernetes.io/managed-by': 'apphost-operator',
        'endpointslice.kubernetes.io/managed-by': 'test.apphost.dev',
      },
    },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: ready.map((r, i) => ({ addresses: [`10.1.0.${i + 1}`], conditions: { ready: r } })),
  });
  await discovery.createNamespacedEndpointSlice({ namespace: ns, body: slice('web-a', [true, false]) });
  const key = `${project}/web`;
  await waitFor('replicas reported', async () => replicas.get(key)?.length === 1, WATCH_WAIT_MS);
  expect(replicas.get(key)).toEqual(['10.1.0.1:8080']);
  // The second pod turns ready; the first starts terminating (not ready).
  await discovery.replaceNamespacedEndpointSlice({
    name: 'web-a',
    namespace: ns,
    body: slice('web-a', [false, true]),
  });
  await waitFor('replica set changed', async () => replicas.get(key)?.[0] === '10.1.0.2:8080', WATCH_WAIT_MS);
  expect(replicas.get(key)).toEqual(['10.1.0.2:8080']);

  const app: App = {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'App',
    metadata: { name: 'web', namespace: ns },
    spec: { runtime: 'cortex', image: 'example/web:1' },
  };
  await custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: APP_PLURAL,
    body: app,
  });
  const current = (await custom.getNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: APP_PLURAL,
    name: 'web',
  })) as App;
  await custom.replaceNamespacedCustomObjectStatus({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: APP_PLURAL,
    name: 'web',
    body: {
      ...current,
      status: {
        conditions: [
          {
            type: 'Ready',
            status: 'False',
            reason: 'CrashLoopBackOff',
            message: 'main.py raised ImportError: No module named numpy',
            lastTransitionTime: new Date().toISOString(),
          },
        ],
      },
    },
  });
  await waitFor('start failure reported', async () => failures.get(key) !== undefined, WATCH_WAIT_MS);
  expect(failures.get(key)).toBe('CrashLoopBackOff: main.py raised ImportError: No module named numpy');
  expect((await resolver.resolve(project, 'web'))?.startFailure?.reason).toBe('CrashLoopBackOff');
});

it('routes by fresh replicas again after its API connections go silent without closing, within the watch idle bound', async () => {
  const IDLE_MS = 2_000;
  const apiserver = new URL(kc.getCurrentCluster()?.server ?? '');
  const relay = await startTcpRelay({ host: apiserver.hostname, port: Number(apiserver.port) });
  const kube = { ...DEFAULT_GATEWAY_KUBE_SETTINGS, watchIdleTimeoutMs: IDLE_MS, requestTimeoutMs: 5_000 };
  const viaRelay = gatewayKubeReader(
    { ...(await testKubeAccess()), server: `https://${relay.address}` },
    kube,
  );
  const r = createKubeAppResolver({ client: viaRelay, log: silentLogger(), kube });
  const seen = new Map<string, string[]>();
  r.watchReplicas?.({
    setReplicas: (p, a, list) =>
      seen.set(
        `${p}/${a}`,
        list.map((x) => x.id),
      ),
    setStartFailure: () => {},
  });
  try {
    await r.start();
    const discovery = kc.makeApiClient(DiscoveryV1Api);
    const slice = (addresses: string[]) => ({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: 'relayed-a',
        namespace: ns,
        labels: {
          'kubernetes.io/service-name': 'relayed',
          'app.kubernetes.io/managed-by': 'apphost-operator',
          'endpointslice.kubernetes.io/managed-by': 'test.apphost.dev',
        },
      },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      endpoints: addresses.map((a) => ({ addresses: [a], conditions: { ready: true } })),
    });
    const key = `${project}/relayed`;
    await discovery.createNamespacedEndpointSlice({ namespace: ns, body: slice(['10.2.0.1']) });
    await waitFor('first replica reported', async () => seen.get(key)?.length === 1, WATCH_WAIT_MS);

    // Every watch connection of the resolver now carries nothing and never closes.
    relay.freeze();
    expect(relay.frozen()).toBeGreaterThan(0);
    await discovery.replaceNamespacedEndpointSlice({
      name: 'relayed-a',
      namespace: ns,
      body: slice(['10.2.0.1', '10.2.0.2']),
    });
    // The watch is given up after the idle bound and reopened on a fresh connection, from its last
    // version, so the change arrives (without the idle bound it would wait for the server's watch timeout).
    await waitFor('second replica reported', async () => seen.get(key)?.length === 2, 5 * IDLE_MS);
    expect(seen.get(key)).toEqual(['10.2.0.1:8080', '10.2.0.2:8080']);
  } finally {
    await r.stop();
    await viaRelay.close();
    await relay.close();
  }
});

it('reports its whole app table at once to watchApps, then each app that appears, changes (readiness, settings, functions learnt) or goes away', async () => {
  const tableProject = `${project}-t`;
  const tableNs = await createTestNamespace(kc, 'gw-tbl', { [PROJECT_LABEL]: tableProject });
  const core = kc.makeApiClient(CoreV1Api);
  const fns = createFunctionsCache({ log: silentLogger(), timeoutMs: 2_000, ttlMs: 60_000 });
  // Routing by Service: the functions are asked of the app's upstream, here a real HTTP server.
  const r = createKubeAppResolver({
    client,
    log: silentLogger(),
    functions: fns,
    routing: 'service',
    upstreamFor: () => fnServer.url,
  });
  const appObj = (name: string, grace = 60): App => ({
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'App',
    metadata: { name, namespace: tableNs },
    spec: { runtime: 'cortex', image: `example/${name}:1`, responseGracePeriodSeconds: grace },
  });
  const create = (name: string) =>
    custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: tableNs,
      plural: APP_PLURAL,
      body: appObj(name),
    });
  const get = async (name: string) =>
    (await custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: tableNs,
      plural: APP_PLURAL,
      name,
    })) as App;
  try {
    await r.start();
    await create('before');
    await waitFor('app visible', async () => !!r.resolve(tableProject, 'before'), WATCH_WAIT_MS);

    const table = new Map<string, ResolvedApp>();
    const events: string[] = [];
    const stop = r.watchApps?.({
      setApp: (a) => {
        table.set(`${a.projectId}/${a.appName}`, a);
        events.push(`set ${a.appName}`);
      },
      removeApp: (p, a) => {
        table.delete(`${p}/${a}`);
        events.push(`remove ${a}`);
      },
    });
    // The snapshot: reported before watchApps returned.
    expect(table.get(`${tableProject}/before`)).toEqual(r.resolve(tableProject, 'before'));
    expect(table.get(`${tableProject}/before`)).toMatchObject({ ready: false, gracePeriodSeconds: 60 });

    // Appears.
    await create('later');
    await waitFor('new app reported', async () => table.has(`${tableProject}/later`), WATCH_WAIT_MS);

    // Turns ready; then its functions are learnt in the background and reported too.
    const later = await get('later');
    await custom.replaceNamespacedCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      namespace: tableNs,
      plural: APP_PLURAL,
      name: 'later',
      body: {
        ...later,
        status: {
          conditions: [
            { type: 'Ready', status: 'True', reason: 'Ready', lastTransitionTime: new Date().toISOString() },
          ],
        },
      },
    });
    await waitFor(
      'readiness reported',
      async () => table.get(`${tableProject}/later`)?.ready === true,
      WATCH_WAIT_MS,
    );
    await waitFor(
      'functions reported',
      async () => table.get(`${tableProject}/later`)?.functions?.[0] === 'echo',
      WATCH_WAIT_MS,
    );

    // A setting changes.
    const again = await get('later');
    await custom.replaceNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: tableNs,
      plural: APP_PLURAL,
      name: 'later',
      body: { ...again, spec: { ...again.spec, responseGracePeriodSeconds: 300 } },
    });
    await waitFor(
      'setting reported',
      async () => table.get(`${tableProject}/later`)?.gracePeriodSeconds === 300,
      WATCH_WAIT_MS,
    );
    expect(table.get(`${tableProject}/later`)).toEqual(r.resolve(tableProject, 'later'));

    // Goes away.
    await custom.deleteNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: tableNs,
      plural: APP_PLURAL,
      name: 'later',
    });
    await waitFor('removal reported', async () => !table.has(`${tableProject}/later`), WATCH_WAIT_MS);

    // The namespace stops being the project's: its apps go away with it.
    const nsObj = await core.readNamespace({ name: tableNs });
    await core.replaceNamespace({
      name: tableNs,
      body: { ...nsObj, metadata: { ...nsObj.metadata, labels: {} } },
    });
    await waitFor(
      'project loss reported',
      async () => ![...table.values()].some((a) => a.projectId === tableProject),
      WATCH_WAIT_MS,
    );
    expect(events).toContain('remove before');

    // Once stopped, nothing more is reported.
    stop?.();
    const seen = events.length;
    await core.replaceNamespace({
      name: tableNs,
      body: {
        ...(await core.readNamespace({ name: tableNs })),
        metadata: {
          ...nsObj.metadata,
          resourceVersion: undefined,
          labels: { [PROJECT_LABEL]: tableProject },
        },
      },
    });
    await waitFor('relabel seen', async () => !!r.resolve(tableProject, 'before'), WATCH_WAIT_MS);
    expect(events.length).toBe(seen);
  } finally {
    await r.stop();
    await fns.close();
    await core.deleteNamespace({ name: tableNs }).catch(() => undefined);
  }
});

it('reports its custom domains at once to watchDomains, then each one assigned, moved to another app, unassigned or deleted, and the domains of a namespace that stops being a project’s', async () => {
  const domProject = `${project}-d`;
  const domNs = await createTestNamespace(kc, 'gw-dom', { [PROJECT_LABEL]: domProject });
  const core = kc.makeApiClient(CoreV1Api);
  const r = createKubeAppResolver({ client, log: silentLogger(), routing: 'service' });
  const assign = (name: string, hostname: string, appName: string) =>
    custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: domNs,
      plural: DOMAIN_ASSIGNMENT_PLURAL,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'DomainAssignment',
        metadata: { name, namespace: domNs },
        spec: { hostname, appName },
      } satisfies DomainAssignment,
    });
  const reassign = async (name: string, appName: string) => {
    const d = (await custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: domNs,
      plural: DOMAIN_ASSIGNMENT_PLURAL,
      name,
    })) as DomainAssignment;
    await custom.replaceNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: domNs,
      plural: DOMAIN_ASSIGNMENT_PLURAL,
      name,
      body: { ...d, spec: { hostname: d.spec.hostname, appName } },
    });
  };
  try {
    await r.start();
    await assign('d1', 'one.domains-test.example', 'a');
    await waitFor('domain visible', async () => !!r.resolveHost('one.domains-test.example'), WATCH_WAIT_MS);

    const table = new Map<string, string>();
    const events: string[] = [];
    const stop = r.watchDomains?.({
      setDomain: (host, t) => {
        if (t) table.set(host, `${t.projectId}/${t.appName}`);
        else table.delete(host);
        events.push(`${host} ${t ? t.appName : 'gone'}`);
      },
    });
    // The snapshot: reported before watchDomains returned, as resolveHost keys it.
    expect(Object.fromEntries(table)).toEqual({ 'one.domains-test.example': `${domProject}/a` });

    // Assigned.
    await assign('d2', 'two.domains-test.example', 'b');
    await waitFor(
      'new domain reported',
      async () => table.get('two.domains-test.example') === `${domProject}/b`,
      WATCH_WAIT_MS,
    );
    // Moved to another app.
    await reassign('d1', 'c');
    await waitFor(
      'move reported',
      async () => table.get('one.domains-test.example') === `${domProject}/c`,
      WATCH_WAIT_MS,
    );
    expect(r.resolveHost('one.domains-test.example')).toEqual({ projectId: domProject, appName: 'c' });
    // Unassigned (no app), then deleted.
    await reassign('d1', '');
    await waitFor('unassignment reported', async () => !table.has('one.domains-test.example'), WATCH_WAIT_MS);
    expect(events).toContain('one.domains-test.example gone');
    await custom.deleteNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: domNs,
      plural: DOMAIN_ASSIGNMENT_PLURAL,
      name: 'd2',
    });
    await waitFor('deletion reported', async () => !table.has('two.domains-test.example'), WATCH_WAIT_MS);

    // The namespace stops being the project's: its domains go with it.
    await assign('d3', 'three.domains-test.example', 'a');
    await waitFor('third reported', async () => table.has('three.domains-test.example'), WATCH_WAIT_MS);
    const nsObj = await core.readNamespace({ name: domNs });
    await core.replaceNamespace({
      name: domNs,
      body: { ...nsObj, metadata: { ...nsObj.metadata, labels: {} } },
    });
    await waitFor('project loss reported', async () => table.size === 0, WATCH_WAIT_MS);

    // Once stopped, nothing more is reported.
    stop?.();
    const seen = events.length;
    await assign('d4', 'four.domains-test.example', 'a');
    await core.replaceNamespace({
      name: domNs,
      body: {
        ...(await core.readNamespace({ name: domNs })),
        metadata: { ...nsObj.metadata, resourceVersion: undefined, labels: { [PROJECT_LABEL]: domProject } },
      },
    });
    await waitFor('relabel seen', async () => !!r.resolveHost('four.domains-test.example'), WATCH_WAIT_MS);
    expect(events.length).toBe(seen);
  } finally {
    await r.stop();
    await core.deleteNamespace({ name: domNs }).catch(() => undefined);
  }
});
