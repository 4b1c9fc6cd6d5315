/**
 * The cluster's AppResolver: watches project namespaces (label `apphost.dev/project`), Apps,
 * DomainAssignments and the EndpointSlices of Apps' Services in all namespaces, and answers from
 * those caches (no API call per request). Each app's ready pod addresses and start failures are
 * reported to the gateway's balancer as they change, so calls go straight to pod IPs.
 * An informer that fails is restarted with a doubling delay (client-node informers stop on error).
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  type Informer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  makeInformer,
  type ObjectCache,
  type V1EndpointSlice,
  type V1Namespace,
} from '@kubernetes/client-node';
import { effectiveScaling, startFailureOf } from '../../apis/v1alpha1/scaling.ts';
import {
  APP_PLURAL,
  type App,
  DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS,
  DOMAIN_ASSIGNMENT_PLURAL,
  type DomainAssignment,
  GROUP,
  HTTP_PORT_NAME,
  MANAGED_SELECTOR,
  MAX_RESPONSE_GRACE_PERIOD_SECONDS,
  PROJECT_LABEL,
  VERSION,
} from '../../apis/v1alpha1/types.ts';
import type { AppResolver, ReplicaSink, ResolvedApp } from '../../shared/contracts/seams.ts';
import { restartOnError } from '../../shared/kube/informer-restart.ts';
import type { Logger } from '../../shared/log.ts';
import { replicasFromSlices, SERVICE_NAME_LABEL } from './endpoints.ts';
import type { FunctionsCache } from './functions.ts';

export interface KubeAppResolver extends AppResolver {
  /** Starts the watches; resolves once every cache has its first full list. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** The App's Service URL (routing through the Service needs cluster DNS: `clusterDomain`). */
export const serviceUpstream = (namespace: string, appName: string, clusterDomain: string) =>
  `http://${appName}.${namespace}.svc.${clusterDomain}:80`;

/** Pure: what the gateway needs to know about an App object. */
export function toResolvedApp(projectId: string, app: App, upstream: string): ResolvedApp {
  const ready =
    (app.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True') ||
    (app.status?.readyReplicas ?? 0) > 0;
  const grace = app.spec.responseGracePeriodSeconds ?? DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS;
  const startFailure = startFailureOf(app);
  return {
    projectId,
    appName: app.metadata.name,
    runtime: app.spec.runtime,
    upstream,
    ready,
    gracePeriodSeconds: Math.min(Math.max(grace, 1), MAX_RESPONSE_GRACE_PERIOD_SECONDS),
    scaling: effectiveScaling(app.spec.scaling),
    ...(startFailure ? { startFailure } : {}),
  };
}

type Watched<T extends KubernetesObject> = Informer<T> & ObjectCache<T>;

export function createKubeAppResolver(deps: {
  kc: KubeConfig;
  log: Logger;
  /** DNS domain of the cluster's Services, for Service URLs (default cluster.local). */
  clusterDomain?: string;
  upstreamFor?: (namespace: string, appName: string) => string;
  /**
   * `endpoints` (default): calls go to the ready pod IPs of the App's EndpointSlices. `service`: to the
   * App's Service by DNS name (needs cluster DNS and kube-proxy; no per-replica limit across pods).
   */
  routing?: 'endpoints' | 'service';
  /** Learns Cortex apps' functions from `GET /functions`; without it functions stay unknown. */
  functions?: FunctionsCache;
}): KubeAppResolver {
  const { kc, log } = deps;
  const clusterDomain = deps.clusterDomain ?? 'cluster.local';
  const upstreamFor =
    deps.upstreamFor ?? ((ns: string, app: string) => serviceUpstream(ns, app, clusterDomain));
  const byEndpoints = (deps.routing ?? 'endpoints') === 'endpoints';
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  const listCustom =
    <T extends KubernetesObject>(plural: string) =>
    async () =>
      (await custom.listClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural,
      })) as KubernetesListObject<T>;

  const namespaces: Watched<V1Namespace> = makeInformer(
    kc,
    '/api/v1/namespaces',
    () => core.listNamespace({ labelSelector: PROJECT_LABEL }),
    PROJECT_LABEL,
  );
  const apps: Watched<App & KubernetesObject> = makeInformer(
    kc,
    `/apis/${GROUP}/${VERSION}/${APP_PLURAL}`,
    listCustom<App & KubernetesObject>(APP_PLURAL),
  );
  const domains: Watched<DomainAssignment & KubernetesObject> = makeInformer(
    kc,
    `/apis/${GROUP}/${VERSION}/${DOMAIN_ASSIGNMENT_PLURAL}`,
    listCustom<DomainAssignment & KubernetesObject>(DOMAIN_ASSIGNMENT_PLURAL),
  );
  // The EndpointSlice controller copies the Service's labels (ours carry MANAGED_SELECTOR) to its slices.
  const slices: Watched<V1EndpointSlice & KubernetesObject> | undefined = byEndpoints
    ? makeInformer(
        kc,
        '/apis/discovery.k8s.io/v1/endpointslices',
        () =>
          discovery.listEndpointSliceForAllNamespaces({ labelSelector: MANAGED_SELECTOR }) as Promise<
            KubernetesListObject<V1EndpointSlice & KubernetesObject>
          >,
        MANAGED_SELECTOR,
      )
    : undefined;

  // Derived lookups, rebuilt lazily after any change.
  let projectNs: Map<string, string> | undefined;
  let nsProject: Map<string, string> | undefined;
  let hosts: Map<string, { projectId: string; appName: string }> | undefined;
  const invalidate = () => {
    projectNs = undefined;
    nsProject = undefined;
    hosts = undefined;
  };
  const projects = () => {
    if (!projectNs || !nsProject) {
      projectNs = new Map();
      nsProject = new Map();
      for (const ns of namespaces.list()) {
        const project = ns.metadata?.labels?.[PROJECT_LABEL];
        const name = ns.metadata?.name;
        if (!project || !name || ns.metadata?.deletionTimestamp) continue;
        projectNs.set(project, name);
        nsProject.set(name, project);
      }
    }
    return { projectNs, nsProject };
  };
  const hostTable = () => {
    if (!hosts) {
      hosts = new Map();
      const { nsProject: byNs } = projects();
      for (const d of domains.list()) {
        const ns = d.metadata.namespace ?? '';
        const projectId = byNs.get(ns);
        const appName = d.spec?.appName;
        if (!projectId || !appName || !d.spec?.hostname) continue;
        hosts.set(d.spec.hostname.toLowerCase(), { projectId, appName });
      }
    }
    return hosts;
  };

  // Reporting replicas and start failures to the balancer (after every change that affects them).
  let sink: ReplicaSink | undefined;
  const serviceOf = (slice: V1EndpointSlice & KubernetesObject) => {
    const ns = slice.metadata?.namespace;
    const svc = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
    return ns && svc ? { ns, svc } : undefined;
  };
  /** One ready replica URL per ns/app, for the functions lookup. */
  const firstReplica = new Map<string, string>();
  const pushService = (ns: string, svc: string) => {
    if (!slices) return;
    const own = slices.list(ns).filter((sl) => sl.metadata?.labels?.[SERVICE_NAME_LABEL] === svc);
    const replicas = replicasFromSlices(own, HTTP_PORT_NAME);
    const first = replicas[0]?.url;
    if (first) firstReplica.set(`${ns}/${svc}`, first);
    else firstReplica.delete(`${ns}/${svc}`);
    const projectId = projects().nsProject.get(ns);
    if (sink && projectId) sink.setReplicas(projectId, svc, replicas);
  };
  const pushApp = (app: App | undefined) => {
    const ns = app?.metadata.namespace;
    const projectId = ns ? projects().nsProject.get(ns) : undefined;
    if (!sink || !app || !projectId) return;
    sink.setStartFailure(projectId, app.metadata.name, startFailureOf(app));
  };
  const pushAll = () => {
    const seen = new Set<string>();
    for (const slice of slices?.list() ?? []) {
      const s = serviceOf(slice);
      if (!s || seen.has(`${s.ns}/${s.svc}`)) continue;
      seen.add(`${s.ns}/${s.svc}`);
      pushService(s.ns, s.svc);
    }
    for (const app of apps.list()) pushApp(app);
  };

  const informers: Array<[string, Watched<KubernetesObject>]> = [
    ['namespaces', namespaces as unknown as Watched<KubernetesObject>],
    ['apps', apps as unknown as Watched<KubernetesObject>],
    ['domainassignments', domains as unknown as Watched<KubernetesObject>],
    ...(slices
      ? [
          ['endpointslices', slices as unknown as Watched<KubernetesObject>] as [
            string,
            Watched<KubernetesObject>,
          ],
        ]
      : []),
  ];
  for (const verb of ['add', 'update', 'delete'] as const) {
    namespaces.on(verb, () => {
      invalidate();
      pushAll();
    });
    apps.on(verb, (app) => {
      invalidate();
      if (verb === 'delete') {
        const projectId = projects().nsProject.get(app.metadata.namespace ?? '');
        if (projectId) sink?.setReplicas(projectId, app.metadata.name, []);
      } else pushApp(app);
    });
    domains.on(verb, invalidate);
    slices?.on(verb, (slice) => {
      const s = serviceOf(slice);
      if (s) pushService(s.ns, s.svc);
    });
  }
  let stopped = false;
  for (const [name, inf] of informers) restartOnError(inf, { name, log, stopped: () => stopped });

  return {
    async start() {
      await Promise.all(informers.map(([, inf]) => inf.start()));
      invalidate();
      pushAll();
    },
    async stop() {
      stopped = true;
      await Promise.all(informers.map(([, inf]) => inf.stop()));
    },
    async resolve(projectId, appName) {
      const ns = projects().projectNs.get(projectId);
      if (!ns) return undefined;
      const app = apps.get(appName, ns);
      if (!app || app.metadata.deletionTimestamp) return undefined;
      const resolved = toResolvedApp(projectId, app, upstreamFor(ns, appName));
      // Asked of one ready pod directly when routing by endpoints (no cluster DNS needed).
      const fnUpstream = slices ? firstReplica.get(`${ns}/${appName}`) : resolved.upstream;
      if (deps.functions && fnUpstream && resolved.runtime === 'cortex' && resolved.ready) {
        const known = deps.functions.known(fnUpstream, app.metadata.resourceVersion ?? '');
        if (known) resolved.functions = known;
      }
      return resolved;
    },
    async resolveHost(hostname) {
      return hostTable().get(hostname.toLowerCase().replace(/\.$/, ''));
    },
    ...(byEndpoints
      ? {
          watchReplicas(s: ReplicaSink) {
            sink = s;
            pushAll();
          },
        }
      : {}),
  };
}
