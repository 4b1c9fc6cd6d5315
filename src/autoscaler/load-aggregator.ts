/**
 * The latest load report of every live reporter (gateway or run worker), summed per app. A reporter
 * not heard from for `ttlMs` is dropped, so a dead gateway stops counting within that bound.
 * Times are the receiver's clock (never the reporter's), so clock skew between hosts does not matter.
 */
import type { AppLoad, LoadReport } from '../shared/contracts/scaling.ts';

export interface AppTotals {
  /** In-flight + queued calls, each reporter's time-average summed. */
  concurrency: number;
  inflight: number;
  queued: number;
  /** Async runs held by workers (already counted in concurrency once they hold a slot or queue for one). */
  runs: number;
  /** In-flight calls per replica, summed over reporters. */
  replicas: Record<string, number>;
  /** Reporters that contributed. */
  reporters: number;
}

interface Entry {
  receivedAt: number;
  apps: Map<string, AppLoad>;
}

/** How reports name an app (`<project>/<app>`). */
export type AppKeyOf = (load: AppLoad) => string | undefined;
export const byProject: AppKeyOf = (l) => `${l.projectId}/${l.appName}`;

export class LoadAggregator {
  readonly #ttlMs: number;
  readonly #keyOf: AppKeyOf;
  readonly #reporters = new Map<string, Entry>();

  constructor(ttlMs: number, keyOf: AppKeyOf = byProject) {
    this.#ttlMs = ttlMs;
    this.#keyOf = keyOf;
  }

  /** Replaces everything `report.reporter` said before. */
  record(report: LoadReport, receivedAt: number): void {
    const apps = new Map<string, AppLoad>();
    for (const a of report.apps) {
      const key = this.#keyOf(a);
      if (key) apps.set(key, a);
    }
    this.#reporters.set(report.reporter, { receivedAt, apps });
  }

  /** Updates one app of one reporter (a wake request) without forgetting its other apps. */
  recordApp(reporter: string, load: AppLoad, receivedAt: number): void {
    const key = this.#keyOf(load);
    if (!key) return;
    const e = this.#reporters.get(reporter) ?? { receivedAt, apps: new Map<string, AppLoad>() };
    e.receivedAt = Math.max(e.receivedAt, receivedAt);
    e.apps.set(key, load);
    this.#reporters.set(reporter, e);
  }

  /** Drops reporters silent for the ttl; returns their names. */
  expire(now: number): string[] {
    const gone: string[] = [];
    for (const [name, e] of this.#reporters) {
      if (now - e.receivedAt >= this.#ttlMs) {
        this.#reporters.delete(name);
        gone.push(name);
      }
    }
    return gone;
  }

  /** What every live reporter says about one app, by its key (reporters past the ttl are ignored). */
  totals(key: string, now: number): AppTotals {
    const t: AppTotals = { concurrency: 0, inflight: 0, queued: 0, runs: 0, replicas: {}, reporters: 0 };
    for (const e of this.#reporters.values()) {
      if (now - e.receivedAt >= this.#ttlMs) continue;
      const a = e.apps.get(key);
      if (!a) continue;
      t.reporters++;
      t.concurrency += a.concurrency;
      t.inflight += a.inflight;
      t.queued += a.queued;
      t.runs += a.runs;
      for (const [replica, n] of Object.entries(a.replicas ?? {})) {
        t.replicas[replica] = (t.replicas[replica] ?? 0) + n;
      }
    }
    return t;
  }

  /** Live reporters. */
  get reporters(): number {
    return this.#reporters.size;
  }
}

/**
 * An app's observed concurrency: what the reporters carry (in-flight + queued, time-averaged; the
 * larger of that and the current count, so a burst that arrived just now is not averaged away) plus
 * the async runs still waiting in JetStream that no worker has taken yet.
 */
export function observedConcurrency(t: AppTotals, runsInStream: number): number {
  const calls = Math.max(t.concurrency, t.inflight + t.queued);
  return calls + Math.max(0, runsInStream - t.runs);
}
