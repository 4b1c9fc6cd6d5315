/**
 * The gateway's per-app balancers: one AppPool per app, fed with ready replicas by an endpoint source
 * (EndpointSlices in a cluster, runtime processes in local mode) and with limits by the app's scaling
 * spec. It also produces this process's load report for the autoscaler.
 */
import type { EffectiveScaling } from '../../apis/v1alpha1/scaling.ts';
import type { AppLoad } from '../../shared/contracts/scaling.ts';
import { AppPool, type PoolEvents, type PoolSettings, type Replica, type StartFailure } from './pool.ts';

export interface BalancerSettings {
  /** Bound on waiting for a free slot while the app has ready replicas. */
  queueTimeoutMs: number;
  /** Bound on waiting for a first ready replica (scale from zero). */
  coldStartTimeoutMs: number;
  /** An app's queue holds this many calls per slot of its largest size (Knative's queue-proxy: 10). */
  queueDepthFactor: number;
  /** Upper bound of any app's queue. */
  maxQueuePerApp: number;
  /** A replica that answered "at capacity" is skipped this long. */
  capacityBlockMs: number;
  /** A replica that refused the connection or is shutting down is skipped this long. */
  unreachableBlockMs: number;
  /** Retries on another replica after answers that prove the function did not run (not counting "at capacity"). */
  maxRetries: number;
  retryAfterSeconds: number;
}

export const DEFAULT_BALANCER_SETTINGS: BalancerSettings = {
  queueTimeoutMs: 30_000,
  coldStartTimeoutMs: 60_000,
  queueDepthFactor: 10,
  maxQueuePerApp: 1_000,
  capacityBlockMs: 100,
  unreachableBlockMs: 2_000,
  maxRetries: 3,
  retryAfterSeconds: 5,
};

export function poolSettingsFor(scaling: EffectiveScaling, s: BalancerSettings): PoolSettings {
  const depth = s.queueDepthFactor * scaling.replicaConcurrency * Math.max(1, scaling.maxReplicas);
  return {
    capacity: scaling.replicaConcurrency,
    maxQueue: Math.max(1, Math.min(s.maxQueuePerApp, depth)),
    queueTimeoutMs: s.queueTimeoutMs,
    coldStartTimeoutMs: s.coldStartTimeoutMs,
    retryAfterSeconds: s.retryAfterSeconds,
  };
}

export const poolKey = (projectId: string, appName: string) => `${projectId}/${appName}`;

export interface BalancerDeps {
  now?: () => number;
  /** A call is held for an app without a ready replica. */
  onWake?: (projectId: string, appName: string, load: AppLoad) => void;
  /** Per-app event hooks (metrics). */
  events?: (projectId: string, appName: string) => PoolEvents;
}

export interface Balancer {
  readonly settings: BalancerSettings;
  /** The app's pool, created on first use and kept in step with its scaling spec. */
  pool(projectId: string, appName: string, scaling: EffectiveScaling): AppPool;
  /** The pool if it exists (no limits known yet otherwise). */
  find(projectId: string, appName: string): AppPool | undefined;
  /** Replaces the app's ready replicas; true when the set changed. */
  setReplicas(projectId: string, appName: string, replicas: readonly Replica[]): boolean;
  setStartFailure(projectId: string, appName: string, failure: StartFailure | undefined): void;
  replicaLoad(projectId: string, appName: string): Record<string, number>;
  /** Forgets an app (deleted): its waiting calls fail with `err`. */
  remove(projectId: string, appName: string, err: unknown): void;
  /** This process's load per app since the last call (apps with nothing to say are left out). */
  loads(runsHeld?: (projectId: string, appName: string) => number): AppLoad[];
  /** Fails every waiting call (the process is stopping). */
  close(err: unknown): void;
  /** Each known app's calls in flight and waiting, and ready replicas (for gauges). */
  stats(): Array<{ projectId: string; appName: string; inflight: number; queued: number; ready: number }>;
}

interface Entry {
  projectId: string;
  appName: string;
  pool: AppPool;
  /** Had load in the last report: report once more at zero so the autoscaler sees the drop. */
  reported: boolean;
}

export function createBalancer(settings: BalancerSettings, deps: BalancerDeps = {}): Balancer {
  const now = deps.now ?? Date.now;
  const entries = new Map<string, Entry>();
  const replicasOf = new Map<string, readonly Replica[]>();
  const failures = new Map<string, StartFailure>();

  const load = (e: Entry, runs: number): AppLoad => {
    const snap = e.pool.snapshot();
    return {
      projectId: e.projectId,
      appName: e.appName,
      concurrency: snap.concurrency,
      inflight: snap.inflight,
      queued: snap.queued,
      runs,
      replicas: snap.replicas,
    };
  };

  const create = (projectId: string, appName: string, ps: PoolSettings): Entry => {
    const key = poolKey(projectId, appName);
    const entry: Entry = {
      projectId,
      appName,
      reported: false,
      pool: new AppPool(key, ps, {
        now,
        onWake: () => deps.onWake?.(projectId, appName, load(entry, 0)),
        ...(deps.events ? { events: deps.events(projectId, appName) } : {}),
      }),
    };
    entry.pool.setReplicas(replicasOf.get(key) ?? []);
    entry.pool.setStartFailure(failures.get(key));
    entries.set(key, entry);
    return entry;
  };

  return {
    settings,
    pool(projectId, appName, scaling) {
      const ps = poolSettingsFor(scaling, settings);
      const e = entries.get(poolKey(projectId, appName));
      if (!e) return create(projectId, appName, ps).pool;
      const cur = e.pool.settings;
      if (cur.capacity !== ps.capacity || cur.maxQueue !== ps.maxQueue) e.pool.configure(ps);
      return e.pool;
    },
    find: (projectId, appName) => entries.get(poolKey(projectId, appName))?.pool,
    setReplicas(projectId, appName, replicas) {
      const key = poolKey(projectId, appName);
      const prev = replicasOf.get(key) ?? [];
      if (sameReplicas(prev, replicas)) return false;
      if (replicas.length === 0) replicasOf.delete(key);
      else replicasOf.set(key, replicas);
      entries.get(key)?.pool.setReplicas(replicas);
      return true;
    },
    setStartFailure(projectId, appName, failure) {
      const key = poolKey(projectId, appName);
      if (failure) failures.set(key, failure);
      else failures.delete(key);
      entries.get(key)?.pool.setStartFailure(failure);
    },
    replicaLoad: (projectId, appName) => entries.get(poolKey(projectId, appName))?.pool.replicaLoad() ?? {},
    remove(projectId, appName, err) {
      const key = poolKey(projectId, appName);
      entries.get(key)?.pool.close(err);
      entries.delete(key);
      replicasOf.delete(key);
      failures.delete(key);
    },
    loads(runsHeld) {
      const out: AppLoad[] = [];
      for (const [key, e] of entries) {
        const runs = runsHeld?.(e.projectId, e.appName) ?? 0;
        const l = load(e, runs);
        const busy = l.concurrency > 0 || l.inflight > 0 || l.queued > 0 || runs > 0;
        if (busy || e.reported) out.push(l);
        e.reported = busy;
        // An idle app without replicas here needs no pool (limits come back with its next call).
        if (!busy && e.pool.idle && e.pool.readyReplicas === 0) entries.delete(key);
      }
      return out;
    },
    close(err) {
      for (const e of entries.values()) e.pool.close(err);
    },
    stats() {
      return [...entries.values()].map((e) => ({
        projectId: e.projectId,
        appName: e.appName,
        ...e.pool.stats(),
      }));
    },
  };
}

function sameReplicas(a: readonly Replica[], b: readonly Replica[]): boolean {
  return a.length === b.length && a.every((r, i) => r.id === b[i]?.id && r.url === b[i]?.url);
}
