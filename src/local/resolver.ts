/**
 * The local AppResolver: apps are runtime processes on loopback ports, domains come from the
 * management store (so an unassign through the management API takes effect at once).
 * Readiness is asked of the runtime itself (GET /ready), its functions of GET /functions.
 */

import type { EffectiveScaling } from '../apis/v1alpha1/scaling.ts';
import type { Runtime } from '../apis/v1alpha1/types.ts';
import type { MemoryStore } from '../management/store/memory.ts';
import type {
  AppResolver,
  AppSink,
  DomainSink,
  Replica,
  ResolvedApp,
  StartFailure,
} from '../shared/contracts/seams.ts';

export interface LocalAppEndpoint {
  runtime: Runtime;
  port: number;
  gracePeriodSeconds: number;
  /** Path answering 200 when ready (cortex: /ready). */
  readinessPath: string;
  /** Bumped on every process start; cached facts of an older generation are dropped. */
  generation: number;
  /** No process serves it yet (its first version is being built or started): calls get 503. */
  starting?: boolean;
  /** The app's scaling settings (replicaConcurrency, ...). */
  scaling?: EffectiveScaling;
}

/** Where the local replicas of each app are (the app host). */
export interface LocalReplicas {
  /** Reports to each sink given, from now on, until the returned function is called. */
  watchReplicas(sink: {
    setReplicas(appName: string, replicas: readonly Replica[]): void;
    setStartFailure(appName: string, failure: StartFailure | undefined): void;
    replicaLoad?(appName: string): Record<string, number>;
  }): () => void;
  replicaCounts(appName: string): { desired: number; ready: number } | undefined;
  /** The apps known (served, starting or reserved). */
  names(): string[];
}

export interface DomainLookup {
  /** The app a hostname is assigned to in `projectId`, if any. */
  appForHost(projectId: string, hostname: string): Promise<string | undefined>;
  /**
   * The hostnames of `projectId` assigned to an app (hostname → app), now and after each change, until
   * the returned function is called (the memory store's `watchAssignedDomains`). Without it the resolver
   * has no `watchDomains`.
   */
  watchAssigned?(projectId: string, onTable: (assigned: ReadonlyMap<string, string>) => void): () => void;
}

/** The domain lookup over local mode's management store (the memory store): per call, and its changes. */
export function storeDomainLookup(
  store: Pick<MemoryStore, 'listDomains' | 'watchAssignedDomains'>,
): Required<DomainLookup> {
  return {
    appForHost: async (projectId, hostname) =>
      (await store.listDomains(projectId)).find((d) => d.hostname === hostname)?.appName,
    watchAssigned: (projectId, onTable) => store.watchAssignedDomains(projectId, onTable),
  };
}

export interface LocalResolverSettings {
  /** Bound on one readiness or /functions probe of a runtime. */
  probeTimeoutMs: number;
}

export const DEFAULT_LOCAL_RESOLVER_SETTINGS: LocalResolverSettings = { probeTimeoutMs: 2_000 };

export type HttpGet = (url: string, timeoutMs: number) => Promise<{ status: number; body: string }>;

export const fetchGet: HttpGet = async (url, timeoutMs) => {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  return { status: res.status, body: await res.text() };
};

/** Lowercase, without a port or a trailing dot: how Host headers are compared. */
export function normalizeHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  const colon = h.lastIndexOf(':');
  if (colon !== -1) h = h.slice(0, colon);
  return h.endsWith('.') ? h.slice(0, -1) : h;
}

export function createLocalResolver(deps: {
  projectId: string;
  endpoint: (appName: string) => LocalAppEndpoint | undefined;
  domains: DomainLookup;
  /** With it, ready replicas are reported to the gateway (no readiness probe per call). */
  replicas?: LocalReplicas;
  get?: HttpGet;
  settings?: Partial<LocalResolverSettings>;
}): AppResolver {
  const s = { ...DEFAULT_LOCAL_RESOLVER_SETTINGS, ...deps.settings };
  const get = deps.get ?? fetchGet;
  const functions = new Map<string, { generation: number; names: readonly string[] }>();

  async function listFunctions(
    appName: string,
    ep: LocalAppEndpoint,
  ): Promise<readonly string[] | undefined> {
    const cached = functions.get(appName);
    if (cached && cached.generation === ep.generation) return cached.names;
    try {
      const res = await get(`http://127.0.0.1:${ep.port}/functions`, s.probeTimeoutMs);
      if (res.status !== 200) return undefined;
      const parsed = JSON.parse(res.body) as { functions?: Array<{ name?: unknown }> };
      const names = (parsed.functions ?? [])
        .map((f) => f.name)
        .filter((n): n is string => typeof n === 'string');
      functions.set(appName, { generation: ep.generation, names });
      return names;
    } catch {
      return undefined;
    }
  }

  /** The app as both `resolve` and the `watchApps` reports give it, before its functions are known. */
  function resolvedApp(appName: string, ep: LocalAppEndpoint, ready: boolean): ResolvedApp {
    return {
      projectId: deps.projectId,
      appName,
      runtime: ep.runtime,
      upstream: `http://127.0.0.1:${ep.port}`,
      ready,
      gracePeriodSeconds: ep.gracePeriodSeconds,
      ...(ep.scaling ? { scaling: ep.scaling } : {}),
    };
  }

  /**
   * What `resolve` answers for a reported app, without waiting: functions only when already listed for
   * this generation (listing them is started otherwise, and `then` runs once they are).
   */
  function resolvedNow(
    replicas: LocalReplicas,
    appName: string,
    ep: LocalAppEndpoint,
    then: () => void,
  ): ResolvedApp {
    const ready = !ep.starting && (replicas.replicaCounts(appName)?.ready ?? 0) > 0;
    const resolved = resolvedApp(appName, ep, ready);
    if (ready && ep.runtime === 'cortex') {
      const cached = functions.get(appName);
      if (cached && cached.generation === ep.generation) resolved.functions = cached.names;
      else
        void listFunctions(appName, ep).then((names) => {
          if (names) then();
        });
    }
    return resolved;
  }

  return {
    async resolve(projectId, appName) {
      if (projectId !== deps.projectId) return undefined;
      const ep = deps.endpoint(appName);
      if (!ep) return undefined;
      let ready = false;
      if (deps.replicas) ready = !ep.starting && (deps.replicas.replicaCounts(appName)?.ready ?? 0) > 0;
      else {
        try {
          ready =
            !ep.starting &&
            (await get(`http://127.0.0.1:${ep.port}${ep.readinessPath}`, s.probeTimeoutMs)).status === 200;
        } catch {
          ready = false;
        }
      }
      const resolved = resolvedApp(appName, ep, ready);
      if (ready && ep.runtime === 'cortex') {
        const names = await listFunctions(appName, ep);
        if (names) resolved.functions = names;
      }
      return resolved;
    },
    async resolveHost(hostname) {
      const appName = await deps.domains.appForHost(deps.projectId, normalizeHost(hostname));
      return appName ? { projectId: deps.projectId, appName } : undefined;
    },
    ...(deps.domains.watchAssigned
      ? {
          // resolveHost answers for a Host whose normalizeHost is an assigned hostname: reported
          // lower-cased (the sink's key; a hostname stored with capitals is then handed to Node, which
          // finds no domain for it, the same answer), each change as the difference from the last table.
          watchDomains(sink: DomainSink) {
            let last = new Map<string, string>();
            return (deps.domains.watchAssigned as NonNullable<DomainLookup['watchAssigned']>)(
              deps.projectId,
              (assigned) => {
                const next = new Map<string, string>();
                for (const [hostname, appName] of assigned) next.set(hostname.toLowerCase(), appName);
                for (const host of last.keys()) if (!next.has(host)) sink.setDomain(host, undefined);
                for (const [host, appName] of next)
                  if (last.get(host) !== appName)
                    sink.setDomain(host, { projectId: deps.projectId, appName });
                last = next;
              },
            );
          },
        }
      : {}),
    ...(deps.replicas
      ? {
          watchReplicas(sink) {
            deps.replicas?.watchReplicas({
              setReplicas: (app, list) => sink.setReplicas(deps.projectId, app, list),
              setStartFailure: (app, f) => sink.setStartFailure(deps.projectId, app, f),
              replicaLoad: (app) => sink.replicaLoad?.(deps.projectId, app) ?? {},
            });
          },
          // Every change of a local app (made known, a version serving, replicas ready or gone, removed)
          // goes through the app host's replica reports (setReplicas each time); each reports the app again.
          watchApps(appSink: AppSink) {
            const replicas = deps.replicas as LocalReplicas;
            let stopped = false;
            const report = (appName: string) => {
              if (stopped) return;
              const ep = deps.endpoint(appName);
              if (!ep) appSink.removeApp(deps.projectId, appName);
              else appSink.setApp(resolvedNow(replicas, appName, ep, () => report(appName)));
            };
            for (const name of replicas.names()) report(name);
            const unwatch = replicas.watchReplicas({
              setReplicas: report,
              setStartFailure: () => {},
            });
            return () => {
              stopped = true;
              unwatch();
            };
          },
        }
      : {}),
  };
}
