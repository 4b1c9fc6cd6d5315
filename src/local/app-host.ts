/**
 * The apps of `apphost dev` as versions of local processes. A new version of an app starts on its own
 * port beside the one that serves; once it answers its readiness probe it becomes the app's endpoint,
 * and only then is the old process stopped (after a short delay, then SIGTERM: it drains its calls).
 * A version that exits or is not ready in time is stopped and the old one keeps serving.
 */
import type { Sha256Digest } from '../apis/v1alpha1/types.ts';
import { type Clock, systemClock } from '../shared/clock.ts';
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
}

export const DEFAULT_APP_HOST_SETTINGS: AppHostSettings = {
  readyTimeoutMs: 120_000,
  probeIntervalMs: 100,
  probeTimeoutMs: 1_000,
  drainDelayMs: 2_000,
  tailLines: 30,
};

/** Where a version came from (a deploy), for `apphost apps get`. */
export interface VersionMeta {
  buildId?: string;
  bundle?: Sha256Digest;
  dependencies?: Sha256Digest;
}

export interface HostedVersion {
  seq: number;
  app: LocalApp;
  meta: VersionMeta;
  port: number;
  /** The supervised process name, `<app>@<seq>`. */
  process: string;
  startedAt: string;
}

export type RolloutResult = { ok: true } | { ok: false; message: string };

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
}

export interface AppHostDeps {
  supervisor: Supervisor;
  python: string;
  env: NodeJS.ProcessEnv;
  log: Logger;
  clock?: Clock;
  get?: HttpGet;
  port?: () => Promise<number>;
  processSpec?: (app: LocalApp, port: number) => ProcessSpec;
  settings?: Partial<AppHostSettings>;
}

interface Hosted {
  endpoint: LocalAppEndpoint;
  current?: HostedVersion;
  pending?: HostedVersion;
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

export function createAppHost(deps: AppHostDeps): AppHost {
  const s = { ...DEFAULT_APP_HOST_SETTINGS, ...deps.settings };
  const clock = deps.clock ?? systemClock;
  const get = deps.get ?? fetchGet;
  const nextPort = deps.port ?? freePort;
  const spec =
    deps.processSpec ?? ((app: LocalApp, port: number) => appProcessSpec(app, port, deps.python, deps.env));
  const apps = new Map<string, Hosted>();
  const draining = new Set<Promise<void>>();
  let seq = 0;

  const hosted = (app: LocalApp): Hosted => {
    let h = apps.get(app.name);
    if (!h) {
      h = {
        endpoint: {
          runtime: app.manifest.spec.runtime,
          port: 0,
          gracePeriodSeconds: app.gracePeriodSeconds,
          readinessPath: readinessPath(app),
          generation: 0,
          starting: true,
        },
      };
      apps.set(app.name, h);
    }
    return h;
  };

  const retire = (v: HostedVersion, delayMs: number) => {
    const p = (async () => {
      if (delayMs > 0) await clock.sleep(delayMs).catch(() => undefined);
      await deps.supervisor.remove(v.process);
    })();
    draining.add(p);
    void p.finally(() => draining.delete(p));
    return p;
  };

  return {
    endpoint: (name) => apps.get(name)?.endpoint,
    reserve: (app) => void hosted(app),

    async rollout(app, meta = {}) {
      const h = hosted(app);
      const tail: string[] = [];
      const v: HostedVersion = {
        seq: ++seq,
        app,
        meta,
        port: await nextPort(),
        process: `${app.name}@${seq}`,
        startedAt: new Date(clock.now()).toISOString(),
      };
      // The newest version wins: one still starting is dropped.
      if (h.pending) void retire(h.pending, 0);
      h.pending = v;
      deps.supervisor.add({
        name: v.process,
        label: app.name,
        spec: () => spec(app, v.port),
        graceMs: () => app.gracePeriodSeconds * 1000,
        onLine: (line) => {
          tail.push(line);
          if (tail.length > s.tailLines) tail.shift();
        },
      });
      const path = readinessPath(app);
      const deadline = clock.now() + s.readyTimeoutMs;
      const failed = async (message: string): Promise<RolloutResult> => {
        if (h.pending === v) h.pending = undefined;
        await retire(v, 0);
        deps.log.warn({ app: app.name, process: v.process }, `new version not started: ${message}`);
        return { ok: false, message };
      };
      for (;;) {
        if (h.pending !== v || apps.get(app.name) !== h)
          return failed('a newer version of the app replaced it');
        const st = deps.supervisor.status(v.process);
        if (!st || st.consecutiveCrashes > 0 || (st.starts > 0 && !st.running))
          return failed(`it exited before it was ready${because(tail)}`);
        try {
          if ((await get(`http://127.0.0.1:${v.port}${path}`, s.probeTimeoutMs)).status === 200) break;
        } catch {
          // not listening yet
        }
        if (clock.now() >= deadline)
          return failed(`it was not ready within ${Math.round(s.readyTimeoutMs / 1000)} s${because(tail)}`);
        await clock.sleep(s.probeIntervalMs).catch(() => undefined);
      }
      // Ready: route to it, then retire the old one.
      const old = h.current;
      h.current = v;
      h.pending = undefined;
      Object.assign(h.endpoint, {
        runtime: app.manifest.spec.runtime,
        port: v.port,
        gracePeriodSeconds: app.gracePeriodSeconds,
        readinessPath: path,
        generation: h.endpoint.generation + 1,
        starting: false,
      });
      deps.log.info({ app: app.name, process: v.process, port: v.port }, 'new version serves');
      if (old) void retire(old, s.drainDelayMs);
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
      await Promise.all([h.current, h.pending].filter((v) => v !== undefined).map((v) => retire(v, 0)));
      return true;
    },

    async stopAll() {
      await deps.supervisor.stopAll();
      await Promise.all([...draining]);
    },
  };
}
