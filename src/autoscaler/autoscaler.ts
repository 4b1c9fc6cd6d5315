/**
 * The autoscaler's memory across ticks, for any number of apps: the load reports (with expiry),
 * a sample window of observed concurrency per app, and the decider's state per app. Each `decide`
 * records one sample and returns the pure decider's answer. The operator (Deployments) and local mode
 * (runtime processes) drive it the same way; only what they do with the answer differs.
 */
import type { EffectiveScaling } from '../apis/v1alpha1/scaling.ts';
import {
  DEFAULT_DECIDER_SETTINGS,
  type DeciderSettings,
  type DeciderState,
  type Decision,
  decide,
  initialState,
} from './decider.ts';
import { type AppKeyOf, byProject, LoadAggregator, observedConcurrency } from './load-aggregator.ts';
import { SampleWindow } from './window.ts';

export interface AutoscalerSettings extends DeciderSettings {
  /** How often every app is decided on. */
  tickMs: number;
  /** A reporter not heard from for this long no longer counts. */
  reportTtlMs: number;
}

export const DEFAULT_AUTOSCALER_SETTINGS: AutoscalerSettings = {
  ...DEFAULT_DECIDER_SETTINGS,
  tickMs: 2_000,
  reportTtlMs: 5_000,
};

export interface ScaledApp {
  /** How load reports name the app (see AppKeyOf). */
  key: string;
  scaling: EffectiveScaling;
  readyReplicas: number;
  /** Replicas asked for now. */
  currentReplicas: number;
  /** Async runs of this app waiting in JetStream (including those workers hold). */
  runsInStream: number;
}

export interface AppDecision extends Decision {
  key: string;
  /** Observed concurrency now, and its stable and panic averages. */
  observed: number;
  stable: number;
  panic: number;
  /** In-flight calls per replica id, summed over reporters. */
  replicaLoad: Record<string, number>;
}

export class Autoscaler {
  readonly settings: AutoscalerSettings;
  readonly reports: LoadAggregator;
  readonly #apps = new Map<string, { window: SampleWindow; state: DeciderState }>();

  constructor(settings: AutoscalerSettings = DEFAULT_AUTOSCALER_SETTINGS, keyOf: AppKeyOf = byProject) {
    this.settings = settings;
    this.reports = new LoadAggregator(settings.reportTtlMs, keyOf);
  }

  decide(app: ScaledApp, now: number): AppDecision {
    let entry = this.#apps.get(app.key);
    if (!entry) {
      entry = { window: new SampleWindow(this.settings.stableWindowMs), state: initialState(now) };
      this.#apps.set(app.key, entry);
    }
    const totals = this.reports.totals(app.key, now);
    const observed = observedConcurrency(totals, app.runsInStream);
    entry.window.record(now, observed);
    const stable = entry.window.average(now, this.settings.stableWindowMs);
    const panic = entry.window.average(now, this.settings.panicWindowMs);
    const d = decide(
      app.scaling,
      {
        now,
        stableConcurrency: stable,
        panicConcurrency: panic,
        readyReplicas: app.readyReplicas,
        currentReplicas: app.currentReplicas,
      },
      entry.state,
      this.settings,
    );
    entry.state = d.state;
    return { ...d, key: app.key, observed, stable, panic, replicaLoad: totals.replicas };
  }

  /** Drops an app that no longer exists, and reporters past the ttl. */
  forget(keep: (key: string) => boolean, now: number): void {
    for (const key of this.#apps.keys()) if (!keep(key)) this.#apps.delete(key);
    this.reports.expire(now);
  }
}

/** One log line's worth of a decision. */
export function describeDecision(d: AppDecision, from: number): string {
  const arrow = d.replicas === from ? `stays at ${from}` : `${from} → ${d.replicas}`;
  const load = `observed ${round(d.observed)}, stable ${round(d.stable)}, panic ${round(d.panic)}`;
  return `${d.key}: ${arrow} replicas (${d.reason}${d.panicking ? ', panicking' : ''}; ${load})`;
}

const round = (n: number) => Math.round(n * 100) / 100;
