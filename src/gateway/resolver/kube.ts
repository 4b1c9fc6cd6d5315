/**
 * The cluster's AppResolver: watches project namespaces (label `apphost.dev/project`), Apps and
 * DomainAssignments in all namespaces, and answers from those caches (no API call per request).
 * An informer that fails is restarted with a doubling delay (client-node informers stop on error).
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  type Informer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  makeInformer,
  type ObjectCache,
  type V1Namespace,
} from '@kubernetes/client-node';
import {
  APP_PLURAL,
  type App,
  DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS,
  DOMAIN_ASSIGNMENT_PLURAL,
  type DomainAssignment,
  GROUP,
  MAX_RESPONSE_GRACE_PERIOD_SECONDS,
  PROJECT_LABEL,
  VERSION,
} from '../../apis/v1alpha1/types.ts';
import type { AppResolver, ResolvedApp } from '../../shared/contracts/seams.ts';
import type { Logger } from '../../shared/log.ts';
import type { FunctionsCache } from './functions.ts';

/** First and largest delay before restarting a failed watch. */
export const WATCH_RESTART_MIN_MS = 1_000;
export const WATCH_RESTART_MAX_MS = 30_000;

export interface KubeAppResolver extends AppResolver {
  /** Starts the watches; resolves once every cache has its first full list. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

export const clusterUpstream = (namespace: string, appName: string) =>
  `http://${appName}.${namespace}.svc.cluster.local:80`;

/** Pure: what the gateway needs to know about an App object. */
export function toResolvedApp(projectId: string, app: App, upstream: string): ResolvedApp {
  const ready =
    (app.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True') ||
    (app.status?.readyReplicas ?? 0) > 0;
  const grace = app.spec.responseGracePeriodSeconds ?? DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS;
  return {
    projectId,
    appName: app.metadata.name,
    runtime: app.spec.runtime,
    upstream,
    ready,
    gracePeriodSeconds: Math.min(Math.max(grace, 1), MAX_RESPONSE_GRACE_PERIOD_SECONDS),
  };
}

type Watched<T extends KubernetesObject> = Informer<T> & ObjectCache<T>;

export function createKubeAppResolver(deps: {
  kc: KubeConfig;
  log: Logger;
  upstreamFor?: (namespace: string, appName: string) => string;
  /** Learns Cortex apps' functions from `GET /functions`; without it functions stay unknown. */
  functions?: FunctionsCache;
}): KubeAppResolver {
  const { kc, log } = deps;
  const upstreamFor = deps.upstreamFor ?? clusterUpstream;
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
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

  const informers: Array<[string, Watched<KubernetesObject>]> = [
    ['namespaces', namespaces as unknown as Watched<KubernetesObject>],
    ['apps', apps as unknown as Watched<KubernetesObject>],
    ['domainassignments', domains as unknown as Watched<KubernetesObject>],
  ];
  let stopped = false;
  for (const [name, inf] of informers) {
    for (const verb of ['add', 'update', 'delete'] as const) inf.on(verb, invalidate);
    let delay = WATCH_RESTART_MIN_MS;
    inf.on('connect', () => {
      delay = WATCH_RESTART_MIN_MS;
    });
    inf.on('error', (err) => {
      if (stopped) return;
      log.warn({ err, watch: name, retryInMs: delay }, 'watch failed; restarting');
      const wait = delay;
      delay = Math.min(delay * 2, WATCH_RESTART_MAX_MS);
      setTimeout(() => {
        if (!stopped) inf.start().catch((e) => log.error({ err: e, watch: name }, 'watch restart failed'));
      }, wait).unref();
    });
  }

  return {
    async start() {
      await Promise.all(informers.map(([, inf]) => inf.start()));
      invalidate();
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
      if (deps.functions && resolved.runtime === 'cortex' && resolved.ready) {
        const known = deps.functions.known(resolved.upstream, app.metadata.resourceVersion ?? '');
        if (known) resolved.functions = known;
      }
      return resolved;
    },
    async resolveHost(hostname) {
      return hostTable().get(hostname.toLowerCase().replace(/\.$/, ''));
    },
  };
}
