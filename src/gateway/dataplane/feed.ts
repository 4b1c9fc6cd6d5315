/**
 * The state Node pushes to the native data plane (docs/design/native-data-plane.md §4): the apps
 * (`AppResolver.watchApps`), their ready replicas and start failures (a tee of the balancer's
 * `ReplicaSink`), the custom domains and the verified run tokens (`cachedRunTokenVerifier`'s
 * `onRemember`), kept here as the wire values, so a `snapshot` can be built at any time, and sent as
 * one delta per change while a data plane is connected.
 *
 * Every state frame of one Node start carries its `gen` and the next value of one `seq` counter. A data
 * plane that sees a gap asks for a `resync`, answered with a full snapshot. A report that changes
 * nothing sends nothing. The token table is bounded as the data plane's is (`tokenCacheMaxEntries`,
 * the oldest remembered going first; an expired entry is dropped). No I/O, no timers: the clock and
 * the frame sink are passed in.
 */
import { effectiveScaling } from '../../apis/v1alpha1/scaling.ts';
import type {
  AppSink,
  DomainSink,
  ReplicaSink,
  ResolvedApp,
  StartFailure,
} from '../../shared/contracts/seams.ts';
import { type BalancerSettings, poolKey, poolSettingsFor } from '../balancer/balancer.ts';
import type { RememberedToken } from '../token-cache.ts';
import type { DataPlaneApp, DataPlaneToken, SnapshotMessage, StateMessage } from './protocol.ts';

/** A state frame before its place in the counter is known. */
type StateDelta = StateMessage extends infer M
  ? M extends StateMessage
    ? Omit<M, 'gen' | 'seq'>
    : never
  : never;

export interface StateFeed {
  /** New per Node start: a data plane's state from another `gen` is replaced whole. */
  readonly gen: string;
  /** The last `seq` sent (-1: none yet). */
  readonly seq: number;
  /** For `AppResolver.watchApps`. */
  readonly apps: AppSink;
  /** Beside the balancer's sink (`teeReplicas`); `replicaLoad` is the balancer's alone. */
  readonly replicas: Pick<ReplicaSink, 'setReplicas' | 'setStartFailure'>;
  /** For `AppResolver.watchDomains`. */
  readonly domains: DomainSink;
  /** For `cachedRunTokenVerifier`'s `onRemember`. */
  remember(token: RememberedToken): void;
  /** Sends a snapshot to `send`, then each change, until `disconnect`. */
  connect(send: (m: StateMessage) => void): void;
  disconnect(): void;
  /** The data plane asked for a resync: a full snapshot, when connected. */
  resync(): void;
}

export function createStateFeed(deps: {
  gen: string;
  /** For each app's pool settings (`poolSettingsFor`). */
  balancer: BalancerSettings;
  tokenCacheMaxEntries: number;
  now: () => number;
}): StateFeed {
  const { gen, now } = deps;
  const apps = new Map<string, DataPlaneApp>();
  const replicas = new Map<string, Array<{ id: string; url: string }>>();
  const failures = new Map<string, StartFailure>();
  const domains = new Map<string, { projectId: string; appName: string }>();
  // Insertion order is remember order: the oldest first, as the data plane's table drops them.
  const tokens = new Map<string, DataPlaneToken>();
  let seq = -1;
  let send: ((m: StateMessage) => void) | undefined;

  const emit = (m: StateDelta) => {
    if (!send) return;
    seq += 1;
    send({ ...m, gen, seq } as StateMessage);
  };

  const dropExpired = () => {
    const t = now();
    for (const [sha, tok] of tokens) if (tok.until <= t) tokens.delete(sha);
  };

  const snapshot = (): SnapshotMessage => {
    dropExpired();
    seq += 1;
    return {
      type: 'snapshot',
      gen,
      seq,
      apps: [...apps.values()],
      replicas: [...replicas].map(([key, r]) => ({ key, replicas: r })),
      failures: [...failures].map(([key, failure]) => ({ key, failure })),
      domains: [...domains].map(([host, t]) => ({ host, ...t })),
      tokens: [...tokens.values()],
    };
  };

  return {
    gen,
    get seq() {
      return seq;
    },
    apps: {
      setApp(app) {
        const key = poolKey(app.projectId, app.appName);
        const wire = toWireApp(app, deps.balancer);
        const prev = apps.get(key);
        if (prev && sameJson(prev, wire)) return;
        apps.set(key, wire);
        emit({ type: 'app', key, app: wire });
      },
      removeApp(projectId, appName) {
        const key = poolKey(projectId, appName);
        if (!apps.delete(key)) return;
        emit({ type: 'app', key, app: null });
      },
    },
    replicas: {
      setReplicas(projectId, appName, list) {
        const key = poolKey(projectId, appName);
        const wire = list.map((r) => ({ id: r.id, url: r.url }));
        const prev = replicas.get(key) ?? [];
        if (sameJson(prev, wire)) return;
        if (wire.length === 0) replicas.delete(key);
        else replicas.set(key, wire);
        emit({ type: 'replicas', key, replicas: wire });
      },
      setStartFailure(projectId, appName, failure) {
        const key = poolKey(projectId, appName);
        const wire = failure ? { reason: failure.reason, message: failure.message } : undefined;
        const prev = failures.get(key);
        if (sameJson(prev ?? null, wire ?? null)) return;
        if (wire) failures.set(key, wire);
        else failures.delete(key);
        emit({ type: 'failure', key, failure: wire ?? null });
      },
    },
    domains: {
      setDomain(rawHost, target) {
        const host = rawHost.toLowerCase();
        const wire = target ? { projectId: target.projectId, appName: target.appName } : undefined;
        if (sameJson(domains.get(host) ?? null, wire ?? null)) return;
        if (wire) domains.set(host, wire);
        else domains.delete(host);
        emit({ type: 'domain', host, target: wire ?? null });
      },
    },
    remember(t) {
      if (deps.tokenCacheMaxEntries <= 0 || t.until <= now()) return;
      // Remembered again: counted as new (moved to the end), as the Rust table and the JS Map do.
      tokens.delete(t.sha256);
      if (tokens.size >= deps.tokenCacheMaxEntries) dropExpired();
      while (tokens.size >= deps.tokenCacheMaxEntries) {
        const oldest = tokens.keys().next().value;
        if (oldest === undefined) break;
        tokens.delete(oldest);
      }
      const wire = { sha256: t.sha256, projectId: t.projectId, until: t.until };
      tokens.set(t.sha256, wire);
      emit({ type: 'token', ...wire });
    },
    connect(s) {
      send = s;
      s(snapshot());
    },
    disconnect() {
      send = undefined;
    },
    resync() {
      send?.(snapshot());
    },
  };
}

/** What the data plane needs of a resolved app: its pool settings computed as the balancer does. */
export function toWireApp(app: ResolvedApp, balancer: BalancerSettings): DataPlaneApp {
  return {
    projectId: app.projectId,
    appName: app.appName,
    runtime: app.runtime,
    upstream: app.upstream,
    ready: app.ready,
    gracePeriodSeconds: app.gracePeriodSeconds,
    functions: app.functions ? [...app.functions] : null,
    pool: poolSettingsFor(app.scaling ?? effectiveScaling(undefined), balancer),
  };
}

/**
 * `resolver` with its replica reports also going to `extra`: the kube resolver keeps one sink
 * (the gateway's balancer), so the feed is teed in front of it rather than registered beside it.
 */
export function teeReplicas<R extends object>(
  resolver: R,
  extra: Pick<ReplicaSink, 'setReplicas' | 'setStartFailure'>,
): R {
  const inner = (resolver as { watchReplicas?(sink: ReplicaSink): void }).watchReplicas?.bind(resolver);
  if (!inner) return resolver;
  const watchReplicas = (sink: ReplicaSink) =>
    inner({
      setReplicas(projectId, appName, list) {
        sink.setReplicas(projectId, appName, list);
        extra.setReplicas(projectId, appName, list);
      },
      setStartFailure(projectId, appName, failure) {
        sink.setStartFailure(projectId, appName, failure);
        extra.setStartFailure(projectId, appName, failure);
      },
      ...(sink.replicaLoad ? { replicaLoad: sink.replicaLoad.bind(sink) } : {}),
    });
  // A proxy, not a copy: every other member is the resolver's own, called on it (private fields work).
  return new Proxy(resolver, {
    get(target, prop) {
      if (prop === 'watchReplicas') return watchReplicas;
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/** Wire values are plain JSON: equal when their JSON is (key order is fixed by the builders above). */
const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
