/**
 * The apps of `apphost dev` as versions of local processes. A new version of an app starts on its own
 * port beside the one that serves; once it answers its readiness probe it becomes the app's endpoint,
 * and only then is the old process stopped (after a short delay, then SIGTERM: it drains its calls).
 * A version that exits or is not ready in time is stopped and the old one keeps serving.
 *
 * A version runs as many replica processes as the app's replica count (`scale`, set by the local
 * autoscaler), each on its own port. The ready replicas of the serving version are reported to the
 * gateway's balancer (`watchReplicas`); a replica that is stopped leaves routing before its SIGTERM,
 * and one that keeps exiting before it is ready makes the app's start failure (held calls fail with it).
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { effectiveScaling } from '../apis/v1alpha1/scaling.ts';
import type { Sha256Digest } from '../apis/v1alpha1/types.ts';
import { type Clock, systemClock } from '../shared/clock.ts';
import type { Replica, StartFailure } from '../shared/contracts/seams.ts';
import type { Logger } from '../shared/log.ts';
import type { LocalApp } from './app-manifests.ts';
import { appProcessSpec, readinessPath } from './app-process.ts';
import { freePort } from './ports.ts';
import { fetchGet, type HttpGet, type LocalAppEndpoint } from './resolver.ts';
import type { ProcessSpec } from './spawner.ts';
import type { Supervisor } from './supervisor.ts';

export interface AppHostSettings {
  /** Bound on a new version answering its readiness probe. */
  readyTimeoutMs: number;
  probeIntervalMs: number;
  /** Bound on one readiness probe. */
  probeTimeoutMs: number;
  /** Time between switching to the new version and SIGTERM to the old one (calls already routed to it arrive). */
  drainDelayMs: number;
  /** Output lines of a version kept to explain why it did not start. */
  tailLines: number;
  /** How often replicas of serving versions are checked (running? ready?). */
  healthIntervalMs: number;
}

export const DEFAULT_APP_HOST_SETTINGS: AppHostSettings = {
  readyTimeoutMs: 120_000,
  probeIntervalMs: 100,
  probeTimeoutMs: 1_000,
  drainDelayMs: 2_000,
  tailLines: 30,
  healthIntervalMs: 200,
};

/** Where a version came from (a deploy), for `apphost apps get`. */
export interface VersionMeta {
  buildId?: string;
  bundle?: Sha256Digest;
  dependencies?: Sha256Digest;
}

export interface HostedReplica {
  /** The supervised process name, `<app>@<seq>#<k>`; also its routing id. */
  process: string;
  port: number;
  ready: boolean;
  /** The supervisor's start count when it was found ready (a restart makes it unready). */
  readyStarts: number;
  probing: boolean;
  /** Where the runtime writes why it could not start. */
  terminationLog: string;
  tail: string[];
}

export interface HostedVersion {
  seq: number;
  app: LocalApp;
  meta: VersionMeta;
  /** The first replica's port and process (the one a rollout proves). */
  port: number;
  process: string;
  startedAt: string;
  replicas: HostedReplica[];
}

export type RolloutResult = { ok: true } | { ok: false; message: string };

/** Where ready replicas and start failures go (the gateway's balancer, keyed by app name). */
export interface LocalReplicaSink {
  setReplicas(appName: string, replicas: readonly Replica[]): void;
  setStartFailure(appName: string, failure: StartFailure | undefined): void;
  /** Calls in flight per replica id (a scale-down stops idle replicas first). */
  replicaLoad?(appName: string): Record<string, number>;
}

export interface AppHost {
  /** What the local resolver routes to (a starting app has `starting` set). */
  endpoint(name: string): LocalAppEndpoint | undefined;
  /** Makes an app known before its first version runs: its calls get 503 meanwhile. */
  reserve(app: LocalApp): void;
  /** Starts `app` as the next version of its app; resolves once it serves, or failed (the old one still serves). */
  rollout(app: LocalApp, meta?: VersionMeta): Promise<RolloutResult>;
  current(name: string): HostedVersion | undefined;
  /** Stops the app's version from this build if it is still starting (its rollout then fails). */
  abandon(name: string, buildId: string): Promise<void>;
  names(): string[];
  /** Stops every version of the app; false when there was none. */
  remove(name: string): Promise<boolean>;
  stopAll(): Promise<void>;
  /** Runs `replicas` processes of the serving version (idle ones are stopped first). */
  scale(name: string, replicas: number): Promise<void>;
  /** Replicas wanted and ready, per app. */
  replicaCounts(name: string): { desired: number; ready: number } | undefined;
  /**
   * Reports every app's ready replicas and start failure from now on, to each sink given (the gateway's
   * balancer, the resolver's app table), until the returned function is called. An app made known
   * (`reserve`) is reported at once, with no replicas; a removed one with no replicas, after it is gone.
   */
  watchReplicas(sink: LocalReplicaSink): () => void;
}

export interface AppHostDeps {
  supervisor: Supervisor;
  python: string;
  env: NodeJS.ProcessEnv;
  log: Logger;
  clock?: Clock;
  get?: HttpGet;
  port?: () => Promise<number>;
  processSpec?: (app: LocalApp, port: number, terminationLog?: string) => ProcessSpec;
  settings?: Partial<AppHostSettings>;
  /** Folder for the replicas' termination logs (a temporary one by default). */
  terminationDir?: string;
}

interface Hosted {
  endpoint: LocalAppEndpoint;
  current?: HostedVersion;
  pending?: HostedVersion;
  /** Replicas the serving version should run. */
  desired: number;
  failure?: StartFailure;
  /** Next replica index of the serving version. */
  nextIndex: number;
  /** Replica changes run one at a time. */
  changing: Promise<void>;
}

/** `: <the error line>` and the output, for a version that did not start (the error first: one line says why). */
export function because(tail: readonly string[]): string {
  if (tail.length === 0) return '';
  const error = [...tail]
    .reverse()
    .map((l) => l.trim())
    .find((l) => /^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*/.test(l));
  return `${error ? `: ${error}` : ''}\n${tail.join('\n')}`;
}

const url = (r: HostedReplica) => `http://127.0.0.1:${r.port}`;

export function createAppHost(deps: AppHostDeps): AppHost {
  const s = { ...DEFAULT_APP_HOST_SETTINGS, ...deps.settings };
  const clock = deps.clock ?? systemClock;
  const get = deps.get ?? fetchGet;
  const nextPort = deps.port ?? freePort;
  const spec =
    deps.processSpec ??
    ((app: LocalApp, port: number, terminationLog?: string) =>
      appProcessSpec(app, port, deps.python, deps.env, terminationLog));
  const apps = new Map<string, Hosted>();
  const draining = new Set<Promise<void>>();
  let termDir = deps.terminationDir;
  const sinks = new Set<LocalReplicaSink>();
  let health: NodeJS.Timeout | undefined;
  let seq = 0;

  const hosted = (app: LocalApp): Hosted => {
    let h = apps.get(app.name);
    if (!h) {
      const scaling = effectiveScaling(app.manifest.spec.scaling);
      h = {
        endpoint: {
          runtime: app.manifest.spec.runtime,
          port: 0,
          gracePeriodSeconds: app.gracePeriodSeconds,
          readinessPath: readinessPath(app),
          generation: 0,
          starting: true,
          scaling,
        },
        // As a new App in a cluster: at least one replica until the autoscaler decides.
        desired: Math.max(scaling.minReplicas, 1),
        nextIndex: 0,
        changing: Promise.resolve(),
      };
      apps.set(app.name, h);
    }
    return h;
  };

  const push = (name: string) => {
    const h = apps.get(name);
    if (sinks.size === 0) return;
    const ready = (h?.current?.replicas ?? []).filter((r) => r.ready);
    // The endpoint (for the resolver's functions lookup) follows the first ready replica; set before
    // the sinks hear of the change, so that the resolver's app table reports the new port.
    const first = ready[0];
    if (h && first) h.endpoint.port = first.port;
    const replicas = ready.map((r) => ({ id: r.process, url: url(r) }));
    const failure = ready.length > 0 ? undefined : h?.failure;
    for (const sink of sinks) {
      sink.setReplicas(name, replicas);
      sink.setStartFailure(name, failure);
    }
  };

  const newReplica = async (v: HostedVersion, index: number): Promise<HostedReplica> => {
    termDir ??= mkdtempSync(join(tmpdir(), 'apphost-termination-'));
    mkdirSync(termDir, { recursive: true });
    const process = `${v.app.name}@${v.seq}#${index}`;
    const terminationLog = join(termDir, `${process.replace(/[^\w.@#-]/g, '_')}.log`);
    // The runtime writes only into a file that exists (as the kubelet creates it in a pod).
    writeFileSync(terminationLog, '');
    const r: HostedReplica = {
      process,
      port: await nextPort(),
      ready: false,
      readyStarts: 0,
      probing: false,
      terminationLog,
      tail: [],
    };
    deps.supervisor.add({
      name: r.process,
      label: v.app.name,
      spec: () => spec(v.app, r.port, terminationLog),
      graceMs: () => v.app.gracePeriodSeconds * 1000,
      onLine: (line) => {
        r.tail.push(line);
        if (r.tail.length > s.tailLines) r.tail.shift();
      },
    });
    return r;
  };

  const stopReplica = (r: HostedReplica, delayMs: number) => {
    const p = (async () => {
      if (delayMs > 0) await clock.sleep(delayMs).catch(() => undefined);
      await deps.supervisor.remove(r.process);
    })();
    draining.add(p);
    void p.finally(() => draining.delete(p));
    return p;
  };

  const retire = (v: HostedVersion, delayMs: number) =>
    Promise.all(v.replicas.map((r) => stopReplica(r, delayMs))).then(() => undefined);

  /** Why a replica that never got ready exited: the runtime's termination log, else its last lines. */
  const whyNotStarted = (r: HostedReplica): string => {
    let message = '';
    try {
      message = readFileSync(r.terminationLog, 'utf8').trim();
    } catch {
      // none written
    }
    if (!message) message = r.tail.slice(-5).join('\n').trim();
    return message || 'its process exited before it was ready';
  };

  /** Starts or stops replicas of the serving version so that `desired` run (one change at a time). */
  const reconcile = (name: string): Promise<void> => {
    const h = apps.get(name);
    if (!h) return Promise.resolve();
    const run = () => reconcileNow(name, h);
    h.changing = h.changing.then(run, run);
    return h.changing;
  };

  const reconcileNow = async (name: string, h: Hosted) => {
    const v = h.current;
    if (!v || apps.get(name) !== h) return;
    while (v.replicas.length < h.desired && apps.get(name) === h && h.current === v) {
      v.replicas.push(await newReplica(v, h.nextIndex++));
    }
    const extra = v.replicas.length - h.desired;
    if (extra <= 0) return;
    // Calls in flight per replica, from the sink that counts them (the gateway's balancer).
    let load: Record<string, number> = {};
    for (const sink of sinks) if (sink.replicaLoad) load = sink.replicaLoad(name);
    // Not ready first, then the idlest, then the newest.
    const victims = [...v.replicas]
      .map((r, i) => ({ r, i }))
      .sort(
        (a, b) =>
          Number(a.r.ready) - Number(b.r.ready) ||
          (load[a.r.process] ?? 0) - (load[b.r.process] ?? 0) ||
          b.i - a.i,
      )
      .slice(0, extra)
      .map((x) => x.r);
    v.replicas = v.replicas.filter((r) => !victims.includes(r));
    // Out of routing first; in-flight calls finish during its drain.
    push(name);
    for (const r of victims) void stopReplica(r, 0);
  };

  /** Marks replicas of serving versions ready or not, and notes an app that cannot start. */
  const checkHealth = () => {
    for (const [name, h] of apps) {
      const v = h.current;
      if (!v) continue;
      let changed = false;
      for (const r of v.replicas) {
        const st = deps.supervisor.status(r.process);
        if (!st) continue;
        if (r.ready && (!st.running || st.starts !== r.readyStarts)) {
          r.ready = false;
          changed = true;
        }
        if (!r.ready && !st.running && st.consecutiveCrashes > 0 && v.replicas.every((x) => !x.ready)) {
          const message = whyNotStarted(r);
          if (h.failure?.message !== message) {
            h.failure = { reason: 'CrashLoopBackOff', message };
            changed = true;
          }
        }
        if (!r.ready && st.running && !r.probing) {
          r.probing = true;
          const starts = st.starts;
          get(`${url(r)}${h.endpoint.readinessPath}`, s.probeTimeoutMs)
            .then(
              (res) => {
                if (res.status !== 200 || deps.supervisor.status(r.process)?.starts !== starts) return;
                if (!v.replicas.includes(r)) return;
                r.ready = true;
                r.readyStarts = starts;
                h.failure = undefined;
                push(name);
              },
              () => undefined,
            )
            .finally(() => {
              r.probing = false;
            });
        }
      }
      if (changed) push(name);
    }
  };

  const ensureHealthLoop = () => {
    if (health) return;
    health = setInterval(checkHealth, s.healthIntervalMs);
    health.unref();
  };

  return {
    endpoint: (name) => apps.get(name)?.endpoint,
    reserve(app) {
      if (apps.has(app.name)) return;
      hosted(app);
      push(app.name);
    },

    async rollout(app, meta = {}) {
      const h = hosted(app);
      const v: HostedVersion = {
        seq: ++seq,
        app,
        meta,
        port: 0,
        process: '',
        startedAt: new Date(clock.now()).toISOString(),
        replicas: [],
      };
      // The newest version wins: one still starting is dropped.
      if (h.pending) void retire(h.pending, 0);
      h.pending = v;
      const first = await newReplica(v, 0);
      v.replicas.push(first);
      v.port = first.port;
      v.process = first.process;
      const path = readinessPath(app);
      const deadline = clock.now() + s.readyTimeoutMs;
      const failed = async (message: string): Promise<RolloutResult> => {
        if (h.pending === v) h.pending = undefined;
        // An app that never served cannot start: calls held for it fail at once, saying why.
        if (!h.current && apps.get(app.name) === h) {
          h.failure = { reason: 'CrashLoopBackOff', message: whyNotStarted(first) };
          push(app.name);
        }
        await retire(v, 0);
        deps.log.warn({ app: app.name, process: first.process }, `new version not started: ${message}`);
        return { ok: false, message };
      };
      for (;;) {
        if (h.pending !== v || apps.get(app.name) !== h)
          return failed('a newer version of the app replaced it');
        const st = deps.supervisor.status(first.process);
        if (!st || st.consecutiveCrashes > 0 || (st.starts > 0 && !st.running))
          return failed(`it exited before it was ready${because(first.tail)}`);
        try {
          if ((await get(`${url(first)}${path}`, s.probeTimeoutMs)).status === 200) {
            first.ready = true;
            first.readyStarts = st.starts;
            break;
          }
        } catch {
          // not listening yet
        }
        if (clock.now() >= deadline)
          return failed(
            `it was not ready within ${Math.round(s.readyTimeoutMs / 1000)} s${because(first.tail)}`,
          );
        await clock.sleep(s.probeIntervalMs).catch(() => undefined);
      }
      // Ready: route to it, then retire the old one.
      const old = h.current;
      h.current = v;
      h.pending = undefined;
      h.failure = undefined;
      h.nextIndex = 1;
      // A new version proves itself with one replica; the autoscaler takes it from there.
      h.desired = Math.max(h.desired, 1);
      Object.assign(h.endpoint, {
        runtime: app.manifest.spec.runtime,
        port: v.port,
        gracePeriodSeconds: app.gracePeriodSeconds,
        readinessPath: path,
        generation: h.endpoint.generation + 1,
        starting: false,
        scaling: effectiveScaling(app.manifest.spec.scaling),
      });
      push(app.name);
      deps.log.info({ app: app.name, process: first.process, port: v.port }, 'new version serves');
      if (old) void retire(old, s.drainDelayMs);
      ensureHealthLoop();
      await reconcile(app.name);
      return { ok: true };
    },

    current: (name) => apps.get(name)?.current,
    names: () => [...apps.keys()],

    async abandon(name, buildId) {
      const h = apps.get(name);
      const v = h?.pending;
      if (!h || !v || v.meta.buildId !== buildId) return;
      h.pending = undefined;
      await retire(v, 0);
    },

    async remove(name) {
      const h = apps.get(name);
      if (!h) return false;
      apps.delete(name);
      for (const sink of sinks) sink.setReplicas(name, []);
      await Promise.all([h.current, h.pending].filter((v) => v !== undefined).map((v) => retire(v, 0)));
      return true;
    },

    async stopAll() {
      clearInterval(health);
      await deps.supervisor.stopAll();
      await Promise.all([...draining]);
    },

    async scale(name, replicas) {
      const h = apps.get(name);
      if (!h) return;
      h.desired = Math.max(0, replicas);
      await reconcile(name);
    },

    replicaCounts(name) {
      const h = apps.get(name);
      if (!h) return undefined;
      return { desired: h.desired, ready: (h.current?.replicas ?? []).filter((r) => r.ready).length };
    },

    watchReplicas(s) {
      sinks.add(s);
      for (const name of apps.keys()) push(name);
      return () => void sinks.delete(s);
    },
  };
}
