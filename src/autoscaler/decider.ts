/**
 * The autoscaling decision, a pure function shaped like Knative's KPA (pkg/autoscaler/scaling):
 *
 *   want(c) = ceil(c / (replicaConcurrency × targetUtilization)) + scalingBuffer   (0 when c is 0)
 *
 * over the stable-window average of observed concurrency (in-flight + queued calls + pending runs).
 * When the panic-window average asks for at least `panicThreshold` × the ready replicas, the decider
 * panics: it scales up from the panic window at once and never down, until the panic window has
 * stayed below the threshold for a whole stable window. The result is clamped to
 * [minReplicas, maxReplicas] (at least 1 while there is load), and a lower value takes effect only
 * once it has been wanted for `cooldownSeconds` (the highest value of that window wins). An autoscaler
 * that has not yet watched an app for one stable window does not scale it down (it lacks history).
 *
 * All state the decision needs is in `DeciderState`, passed in and returned: no clock, no I/O.
 */
import type { EffectiveScaling } from '../apis/v1alpha1/scaling.ts';

export interface DeciderSettings {
  /** Averaging window for the normal decision. */
  stableWindowMs: number;
  /** Short averaging window that detects bursts. */
  panicWindowMs: number;
  /** Panic when the panic window wants this many times the ready replicas (Knative: 200 %). */
  panicThreshold: number;
}

export const DEFAULT_DECIDER_SETTINGS: DeciderSettings = {
  stableWindowMs: 60_000,
  panicWindowMs: 6_000,
  panicThreshold: 2,
};

export interface Observation {
  now: number;
  /** Average concurrency over the stable window. */
  stableConcurrency: number;
  /** Average concurrency over the panic window. */
  panicConcurrency: number;
  /** Replicas ready to serve right now. */
  readyReplicas: number;
  /** Replicas asked for at the moment (what the last decision set). */
  currentReplicas: number;
}

export interface DeciderState {
  /** When this app was first decided on by this autoscaler. */
  startedAt: number;
  /** Last time the panic window was over the threshold; undefined when not panicking. */
  panicSince?: number;
  /** Highest replica count asked for in this panic. */
  maxPanicReplicas: number;
  /** Decisions of the last cooldown period, oldest first. */
  recent: ReadonlyArray<{ at: number; replicas: number }>;
}

export const ScaleReason = {
  /** The stable window's load. */
  Load: 'Load',
  /** A burst in the panic window. */
  Panic: 'Panic',
  /** Held at a higher value until the cooldown has passed. */
  Cooldown: 'Cooldown',
  /** Not scaled down: not yet one stable window of history. */
  WarmingUp: 'WarmingUp',
  MinReplicas: 'MinReplicas',
  MaxReplicas: 'MaxReplicas',
  /** No load for the cooldown: down to minReplicas (which may be 0). */
  Idle: 'Idle',
} as const;
export type ScaleReason = (typeof ScaleReason)[keyof typeof ScaleReason];

export interface Decision {
  replicas: number;
  reason: ScaleReason;
  panicking: boolean;
  /** Replicas the stable and panic windows ask for before clamps and cooldown (for logs). */
  stableWant: number;
  panicWant: number;
  state: DeciderState;
}

export function initialState(now: number): DeciderState {
  return { startedAt: now, maxPanicReplicas: 0, recent: [] };
}

/** Replicas the load `c` needs at `perReplica` calls each (tolerant of float noise just above an integer). */
export function replicasFor(c: number, perReplica: number): number {
  if (!(c > 0)) return 0;
  return Math.max(1, Math.ceil(c / perReplica - 1e-9));
}

export function decide(
  spec: EffectiveScaling,
  obs: Observation,
  prev: DeciderState,
  s: DeciderSettings = DEFAULT_DECIDER_SETTINGS,
): Decision {
  const perReplica = Math.max((spec.replicaConcurrency * spec.targetUtilization) / 100, 1e-9);
  const withBuffer = (n: number) => (n > 0 ? n + spec.scalingBuffer : 0);
  const stableNeed = replicasFor(obs.stableConcurrency, perReplica);
  const panicNeed = replicasFor(obs.panicConcurrency, perReplica);
  const stableWant = withBuffer(stableNeed);
  const panicWant = withBuffer(panicNeed);

  // Panic is judged without the buffer, against the replicas that can serve now (at least 1).
  const over = panicNeed > 0 && panicNeed / Math.max(1, obs.readyReplicas) >= s.panicThreshold;
  let panicSince = prev.panicSince;
  let maxPanicReplicas = prev.maxPanicReplicas;
  if (over) panicSince = obs.now;
  else if (panicSince !== undefined && obs.now - panicSince >= s.stableWindowMs) {
    panicSince = undefined;
    maxPanicReplicas = 0;
  }
  const panicking = panicSince !== undefined;

  const load = obs.stableConcurrency > 0 || obs.panicConcurrency > 0;
  let want = stableWant;
  let reason: ScaleReason = panicking ? ScaleReason.Panic : load ? ScaleReason.Load : ScaleReason.Idle;
  if (panicking) {
    want = Math.max(want, panicWant, maxPanicReplicas);
    maxPanicReplicas = want;
  }

  // Clamps: load always gets at least one replica, even with minReplicas 0.
  const floor = Math.max(spec.minReplicas, load ? 1 : 0);
  if (want < floor) {
    want = floor;
    if (reason !== ScaleReason.Idle) reason = ScaleReason.MinReplicas;
  }
  if (want > spec.maxReplicas) {
    want = spec.maxReplicas;
    reason = ScaleReason.MaxReplicas;
  }

  // Cooldown: the highest value wanted during the last cooldownSeconds wins, so increases apply at
  // once and a decrease only after it has held for the whole period.
  const cooldownMs = spec.cooldownSeconds * 1000;
  const recent = [...prev.recent.filter((r) => obs.now - r.at < cooldownMs), { at: obs.now, replicas: want }];
  let replicas = want;
  for (const r of recent) replicas = Math.max(replicas, Math.min(r.replicas, spec.maxReplicas));
  if (replicas > want) reason = ScaleReason.Cooldown;

  // Without a stable window of history, keep what runs (a restarted autoscaler must not scale down).
  if (obs.now - prev.startedAt < s.stableWindowMs && replicas < obs.currentReplicas) {
    replicas = Math.min(obs.currentReplicas, spec.maxReplicas);
    reason = ScaleReason.WarmingUp;
  }

  return {
    replicas,
    reason,
    panicking,
    stableWant,
    panicWant,
    state: {
      startedAt: prev.startedAt,
      ...(panicSince !== undefined ? { panicSince } : {}),
      maxPanicReplicas,
      recent,
    },
  };
}
