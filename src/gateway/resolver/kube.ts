/**
 * The cluster's AppResolver: watches project namespaces (label `apphost.dev/project`), Apps,
 * DomainAssignments and the EndpointSlices of Apps' Services in all namespaces, and answers from
 * those caches (no API call per request). Each app's ready pod addresses and start failures are
 * reported to the gateway's balancer as they change, so calls go straight to pod IPs.
 * The caches are the shared informer's (src/shared/kube/informer.ts): every list is bounded, every
 * watch ends after `watchTimeoutSeconds` (or `watchIdleTimeoutMs` of silence, a connection that died
 * without closing) and is reopened from the last version, and a failed watch relists with backoff.
 */
import { effectiveScaling, startFailureOf } from '../../apis/v1alpha1/scaling.ts';
import {
  type App,
  DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS,
  type DomainAssignment,
  HTTP_PORT_NAME,
  MANAGED_SELECTOR,
  MAX_RESPONSE_GRACE_PERIOD_SECONDS,
  PROJECT_LABEL,
} from '../../apis/v1alpha1/types.ts';
import type {
  AppResolver,
  AppSink,
  DomainSink,
  ReplicaSink,
  ResolvedApp,
} from '../../shared/contracts/seams.ts';
import type { KubeReader } from '../../shared/kube/client.ts';
import { createInformer, type Informer, type InformerHandlers } from '../../shared/kube/informer.ts';
import {
  type EndpointSlice,
  type Namespace,
  type ObjectWithMeta,
  Resources,
  type ResourceType,
} from '../../shared/kube/objects.ts';
import type { Logger } from '../../shared/log.ts';
import {
  DEFAULT_GATEWAY_KUBE_SETTINGS,
  type GatewayKubeSettings,
  gatewayInformerSettings,
} from '../kube-settings.ts';
import { replicasFromSlices, SERVICE_NAME_LABEL } from './endpoints.ts';
import type { FunctionsCache } from './functions.ts';

export interface KubeAppResolver extends AppResolver {
  /** Starts the watches; resolves once every cache has its first full list (bounded: `syncTimeoutMs`). */
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

/** What the routing table keeps of an EndpointSlice. */
const slimSlice = (sl: EndpointSlice): EndpointSlice => ({
  metadata: {
    name: sl.metadata.name,
    namespace: sl.metadata.namespace,
    labels: sl.metadata.labels,
    resourceVersion: sl.metadata.resourceVersion,
  },
  addressType: sl.addressType,
  endpoints: sl.endpoints ?? [],
  ...(sl.ports ? { ports: sl.ports } : {}),
});
const slimNamespace = (ns: Namespace): Namespace => ({
  metadata: {
    name: ns.metadata.name,
    labels: ns.metadata.labels,
    resourceVersion: ns.metadata.resourceVersion,
    ...(ns.metadata.deletionTimestamp ? { deletionTimestamp: ns.metadata.deletionTimestamp } : {}),
  },
});
/** The Service a slice belongs to, as `namespace/name` (the index of the slices cache). */
const sliceService = (sl: EndpointSlice): string | undefined => {
  const svc = sl.metadata.labels?.[SERVICE_NAME_LABEL];
  return svc && sl.metadata.namespace ? `${sl.metadata.namespace}/${svc}` : undefined;
};
const onEveryChange = <T extends ObjectWithMeta>(fn: (obj: T) => void): InformerHandlers<T> => ({
  onAdd: fn,
  onUpdate: fn,
  onDelete: fn,
});

export function createKubeAppResolver(deps: {
  /** The API client (the gateway's: kube-client.ts). */
  client: KubeReader;
  log: Logger;
  /** Informer bounds (default DEFAULT_GATEWAY_KUBE_SETTINGS); the client's own are set where it is built. */
  kube?: GatewayKubeSettings;
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
  const { log } = deps;
  const ks = deps.kube ?? DEFAULT_GATEWAY_KUBE_SETTINGS;
  const { client } = deps;
  const clusterDomain = deps.clusterDomain ?? 'cluster.local';
  const upstreamFor =
    deps.upstreamFor ?? ((ns: string, app: string) => serviceUpstream(ns, app, clusterDomain));
  const byEndpoints = (deps.routing ?? 'endpoints') === 'endpoints';
  const informerSettings = gatewayInformerSettings(ks);
  const watch = <T extends ObjectWithMeta>(
    type: ResourceType,
    handlers: InformerHandlers<T>,
    extra: Pick<Parameters<typeof createInformer<T>>[0], 'labelSelector' | 'transform' | 'indexBy'> = {},
  ): Informer<T> => createInformer<T>({ client, type, settings: informerSettings, handlers, log, ...extra });

  // Derived lookups, rebuilt lazily after any change.
  let projectNs: Map<string, string> | undefined;
  let nsProject: Map<string, string> | undefined;
  let hosts: Map<string, { projectId: string; appName: string }> | undefined;
  const invalidate = () => {
    projectNs = undefined;
    nsProject = undefined;
    hosts = undefined;
  };

  // Reporting replicas and start failures to the balancer (after every change that affects them).
  let sink: ReplicaSink | undefined;
  /** One ready replica URL per ns/app, for the functions lookup. */
  const firstReplica = new Map<string, string>();

  const namespaces = watch<Namespace>(
    Resources.Namespace,
    onEveryChange(() => {
      invalidate();
      pushAll();
      // A project label added, changed or removed moves every app of the namespace, and its domains.
      reportAllApps();
      reportDomains();
    }),
    { labelSelector: PROJECT_LABEL, transform: slimNamespace },
  );
  const apps = watch<App>(Resources.App, {
    onAdd: (app) => {
      invalidate();
      pushApp(app);
      reportApp(app.metadata.namespace, app.metadata.name);
    },
    onUpdate: (app) => {
      invalidate();
      pushApp(app);
      reportApp(app.metadata.namespace, app.metadata.name);
    },
    onDelete: (app) => {
      invalidate();
      const projectId = projects().nsProject.get(app.metadata.namespace ?? '');
      if (projectId) sink?.setReplicas(projectId, app.metadata.name, []);
      reportApp(app.metadata.namespace, app.metadata.name);
    },
  });
  const domains = watch<DomainAssignment>(
    Resources.DomainAssignment,
    onEveryChange(() => {
      invalidate();
      reportDomains();
    }),
  );
  // The EndpointSlice controller copies the Service's labels (ours carry MANAGED_SELECTOR) to its slices.
  const slices = byEndpoints
    ? watch<EndpointSlice>(
        Resources.EndpointSlice,
        onEveryChange((sl) => {
          const key = sliceService(sl);
          if (!key) return;
          pushService(key);
          // The first ready replica is where the app's functions are asked: they may be known now.
          const slash = key.indexOf('/');
          reportApp(key.slice(0, slash), key.slice(slash + 1));
        }),
        { labelSelector: MANAGED_SELECTOR, transform: slimSlice, indexBy: sliceService },
      )
    : undefined;

  function projects() {
    if (!projectNs || !nsProject) {
      projectNs = new Map();
      nsProject = new Map();
      for (const ns of namespaces.list()) {
        const project = ns.metadata.labels?.[PROJECT_LABEL];
        const name = ns.metadata.name;
        if (!project || !name || ns.metadata.deletionTimestamp) continue;
        projectNs.set(project, name);
        nsProject.set(name, project);
      }
    }
    return { projectNs, nsProject };
  }
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

  /** Reports one Service's ready replicas (`key` is `namespace/name`). */
  function pushService(key: string) {
    if (!slices) return;
    const replicas = replicasFromSlices(slices.byIndex(key), HTTP_PORT_NAME);
    const first = replicas[0]?.url;
    if (first) firstReplica.set(key, first);
    else firstReplica.delete(key);
    const slash = key.indexOf('/');
    const projectId = projects().nsProject.get(key.slice(0, slash));
    if (sink && projectId) sink.setReplicas(projectId, key.slice(slash + 1), replicas);
  }
  function pushApp(app: App | undefined) {
    const ns = app?.metadata.namespace;
    const projectId = ns ? projects().nsProject.get(ns) : undefined;
    if (!sink || !app || !projectId) return;
    sink.setStartFailure(projectId, app.metadata.name, startFailureOf(app));
  }
  /** What `resolve` answers for the App object `app` of project `projectId` in namespace `ns`. */
  function resolvedOf(projectId: string, ns: string, app: App): ResolvedApp {
    const appName = app.metadata.name;
    const resolved = toResolvedApp(projectId, app, upstreamFor(ns, appName));
    // Asked of one ready pod directly when routing by endpoints (no cluster DNS needed).
    const fnUpstream = slices ? firstReplica.get(`${ns}/${appName}`) : resolved.upstream;
    if (deps.functions && fnUpstream && resolved.runtime === 'cortex' && resolved.ready) {
      const known = deps.functions.known(fnUpstream, app.metadata.resourceVersion ?? '');
      if (known) resolved.functions = known;
    }
    return resolved;
  }
  /** The app `name` of namespace `ns` as it resolves now, with its `project/app` key; none if it does not. */
  function current(ns: string, name: string): { key: string; app: ResolvedApp } | undefined {
    const projectId = projects().nsProject.get(ns);
    const app = projectId ? apps.get(ns, name) : undefined;
    if (!projectId || !app || app.metadata.deletionTimestamp) return undefined;
    return { key: `${projectId}/${name}`, app: resolvedOf(projectId, ns, app) };
  }

  // The app table's watchers (watchApps), each with what it was last told is present (key →
  // namespace and names), so that an app that stops resolving (deleted, being deleted, its namespace no
  // longer a project's) is reported gone.
  type Present = Map<string, { ns: string; projectId: string; appName: string }>;
  const appWatchers = new Set<{ sink: AppSink; present: Present }>();
  /** Reports the app `name` of namespace `ns` to every watcher: as it resolves now, or gone. */
  function reportApp(ns: string | undefined, name: string) {
    if (appWatchers.size === 0 || !ns) return;
    const now = current(ns, name);
    for (const w of appWatchers) {
      for (const [key, was] of w.present)
        if (was.ns === ns && was.appName === name && key !== now?.key) {
          w.present.delete(key);
          w.sink.removeApp(was.projectId, was.appName);
        }
      if (now) {
        w.present.set(now.key, { ns, projectId: now.app.projectId, appName: name });
        w.sink.setApp(now.app);
      }
    }
  }
  /** Reports every app to `watchers`: each that resolves, and each told before that no longer does. */
  function reportAllApps(watchers: Iterable<{ sink: AppSink; present: Present }> = appWatchers) {
    const all: Array<{ ns: string; key: string; app: ResolvedApp }> = [];
    for (const app of apps.list()) {
      const ns = app.metadata.namespace;
      const now = ns ? current(ns, app.metadata.name) : undefined;
      if (ns && now) all.push({ ns, ...now });
    }
    const keys = new Set(all.map((a) => a.key));
    for (const w of watchers) {
      for (const [key, was] of w.present)
        if (!keys.has(key)) {
          w.present.delete(key);
          w.sink.removeApp(was.projectId, was.appName);
        }
      for (const { ns, key, app } of all) {
        w.present.set(key, { ns, projectId: app.projectId, appName: app.appName });
        w.sink.setApp(app);
      }
    }
  }

  // The host table's watchers (watchDomains), each with what it was last told (host → target), so that
  // a host no longer in the table (unassigned, deleted, its namespace no longer a project's) is reported gone.
  type Told = Map<string, { projectId: string; appName: string }>;
  const domainWatchers = new Set<{ sink: DomainSink; told: Told }>();
  /** Reports to `watchers` each host of the table that is new or moved, and each told before that is gone. */
  function reportDomains(watchers: Iterable<{ sink: DomainSink; told: Told }> = domainWatchers) {
    const to = [...watchers];
    if (to.length === 0) return;
    const table = hostTable();
    for (const w of to) {
      for (const host of w.told.keys())
        if (!table.has(host)) {
          w.told.delete(host);
          w.sink.setDomain(host, undefined);
        }
      for (const [host, t] of table) {
        const was = w.told.get(host);
        if (was?.projectId === t.projectId && was.appName === t.appName) continue;
        w.told.set(host, t);
        w.sink.setDomain(host, { projectId: t.projectId, appName: t.appName });
      }
    }
  }

  function pushAll() {
    const seen = new Set<string>();
    for (const slice of slices?.list() ?? []) {
      const key = sliceService(slice);
      if (!key || seen.has(key)) continue;
      seen.add(key);
      pushService(key);
    }
    for (const app of apps.list()) pushApp(app);
  }

  const informers = [namespaces, apps, domains, ...(slices ? [slices] : [])];
  let unwatchFunctions: (() => void) | undefined;
  return {
    async start() {
      for (const inf of informers) inf.start();
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`the gateway's caches were not filled within ${ks.syncTimeoutMs} ms`)),
          ks.syncTimeoutMs,
        );
      });
      try {
        await Promise.race([Promise.all(informers.map((inf) => inf.waitForSync())), bound]);
      } finally {
        clearTimeout(timer);
      }
      invalidate();
      pushAll();
      reportDomains();
    },
    async stop() {
      unwatchFunctions?.();
      unwatchFunctions = undefined;
      await Promise.all(informers.map((inf) => inf.stop()));
    },
    resolve(projectId, appName) {
      const ns = projects().projectNs.get(projectId);
      if (!ns) return undefined;
      const app = apps.get(ns, appName);
      if (!app || app.metadata.deletionTimestamp) return undefined;
      return resolvedOf(projectId, ns, app);
    },
    resolveHost(hostname) {
      return hostTable().get(hostname.toLowerCase().replace(/\.$/, ''));
    },
    watchApps(appSink) {
      // A Cortex app's functions are learnt in the background: each answer that changed is reported.
      unwatchFunctions ??= deps.functions?.watch?.((upstream) => {
        for (const app of apps.list()) {
          const ns = app.metadata.namespace ?? '';
          const at = slices
            ? firstReplica.get(`${ns}/${app.metadata.name}`)
            : upstreamFor(ns, app.metadata.name);
          if (at === upstream && app.spec.runtime === 'cortex') reportApp(ns, app.metadata.name);
        }
      });
      const w = { sink: appSink, present: new Map() as Present };
      reportAllApps([w]);
      appWatchers.add(w);
      return () => void appWatchers.delete(w);
    },
    watchDomains(domainSink) {
      const w = { sink: domainSink, told: new Map() as Told };
      reportDomains([w]);
      domainWatchers.add(w);
      return () => void domainWatchers.delete(w);
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
