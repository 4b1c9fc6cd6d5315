import { describe, expect, it } from 'vitest';
import type { EffectiveScaling } from '../apis/v1alpha1/scaling.ts';
import {
  type DeciderState,
  decide,
  initialState,
  type Observation,
  replicasFor,
  ScaleReason,
} from './decider.ts';

// 10 calls per replica at 100 %: easy arithmetic in the tables.
const spec = (over: Partial<EffectiveScaling> = {}): EffectiveScaling => ({
  minReplicas: 0,
  maxReplicas: 10,
  replicaConcurrency: 10,
  targetUtilization: 100,
  scalingBuffer: 0,
  cooldownSeconds: 0,
  ...over,
});
const T0 = 1_000_000;
// Warmed up: the autoscaler has watched the app for longer than the stable window.
const warm: DeciderState = initialState(T0 - 120_000);
const obs = (over: Partial<Observation> = {}): Observation => ({
  now: T0,
  stableConcurrency: 0,
  panicConcurrency: 0,
  readyReplicas: 1,
  currentReplicas: 1,
  ...over,
});

describe('replicasFor', () => {
  it.each([
    [0, 10, 0],
    [-1, 10, 0],
    [0.01, 10, 1],
    [10, 10, 1],
    [10.000000001, 10, 1],
    [10.5, 10, 2],
    [21, 7, 3],
  ])('%d calls at %d per replica need %d', (c, per, want) => {
    expect(replicasFor(c, per)).toBe(want);
  });
});

describe('decide: one tick', () => {
  it.each<{
    name: string;
    spec?: Partial<EffectiveScaling>;
    obs: Partial<Observation>;
    want: number;
    reason: ScaleReason;
    panicking?: boolean;
  }>([
    { name: 'no load, min 0: zero', obs: {}, want: 0, reason: ScaleReason.Idle },
    { name: 'no load, min 2: two', spec: { minReplicas: 2 }, obs: {}, want: 2, reason: ScaleReason.Idle },
    {
      name: 'stable load at target: ceil(c / target)',
      obs: { stableConcurrency: 25, panicConcurrency: 25, readyReplicas: 3, currentReplicas: 3 },
      want: 3,
      reason: ScaleReason.Load,
    },
    {
      name: 'target utilization 50 %: twice the replicas',
      spec: { targetUtilization: 50 },
      obs: { stableConcurrency: 25, panicConcurrency: 25, readyReplicas: 5, currentReplicas: 5 },
      want: 5,
      reason: ScaleReason.Load,
    },
    {
      name: 'any load from zero gets one replica (min 0)',
      obs: { stableConcurrency: 0.02, panicConcurrency: 0.2, readyReplicas: 0, currentReplicas: 0 },
      want: 1,
      reason: ScaleReason.Load,
    },
    {
      name: 'buffer is added while there is load',
      spec: { scalingBuffer: 2 },
      obs: { stableConcurrency: 15, panicConcurrency: 15, readyReplicas: 4, currentReplicas: 4 },
      want: 4,
      reason: ScaleReason.Load,
    },
    {
      name: 'buffer is not kept without load: min 0 still reaches zero',
      spec: { scalingBuffer: 2 },
      obs: {},
      want: 0,
      reason: ScaleReason.Idle,
    },
    {
      name: 'clamped to maxReplicas',
      spec: { maxReplicas: 3 },
      obs: { stableConcurrency: 100, panicConcurrency: 100, readyReplicas: 3, currentReplicas: 3 },
      want: 3,
      reason: ScaleReason.MaxReplicas,
      panicking: true,
    },
    {
      name: 'raised to minReplicas under light load',
      spec: { minReplicas: 3 },
      obs: { stableConcurrency: 5, panicConcurrency: 5, readyReplicas: 3, currentReplicas: 3 },
      want: 3,
      reason: ScaleReason.MinReplicas,
    },
    {
      name: 'panic: the panic window asks for 2x the ready replicas, it wins at once',
      obs: { stableConcurrency: 12, panicConcurrency: 40, readyReplicas: 2, currentReplicas: 2 },
      want: 4,
      reason: ScaleReason.Panic,
      panicking: true,
    },
    {
      name: 'no panic just under the threshold (stable decides)',
      obs: { stableConcurrency: 12, panicConcurrency: 30, readyReplicas: 2, currentReplicas: 2 },
      want: 2,
      reason: ScaleReason.Load,
    },
    {
      name: 'panic from zero ready replicas counts them as one',
      obs: { stableConcurrency: 3, panicConcurrency: 30, readyReplicas: 0, currentReplicas: 1 },
      want: 3,
      reason: ScaleReason.Panic,
      panicking: true,
    },
  ])('$name', (t) => {
    const d = decide(spec(t.spec), obs(t.obs), warm);
    expect({ replicas: d.replicas, reason: d.reason, panicking: d.panicking }).toEqual({
      replicas: t.want,
      reason: t.reason,
      panicking: t.panicking ?? false,
    });
  });
});

/** Runs ticks in order, carrying the state; returns each decision's replicas and reason. */
function run(
  s: EffectiveScaling,
  ticks: Array<Partial<Observation> & { at: number }>,
  start: DeciderState = warm,
) {
  let state = start;
  let current = ticks[0]?.currentReplicas ?? 1;
  return ticks.map(({ at, ...o }) => {
    const d = decide(s, obs({ currentReplicas: current, readyReplicas: current, ...o, now: T0 + at }), state);
    state = d.state;
    current = d.replicas;
    return [d.replicas, d.reason] as const;
  });
}

describe('decide: over time', () => {
  it('cooldown: a decrease applies only after it held for cooldownSeconds; increases at once', () => {
    const s = spec({ cooldownSeconds: 30 });
    const load = (c: number) => ({ stableConcurrency: c, panicConcurrency: c });
    expect(
      run(s, [
        { at: 0, ...load(40), currentReplicas: 4 },
        { at: 10_000, ...load(10) },
        { at: 29_000, ...load(10) },
        { at: 30_000, ...load(10) },
        { at: 31_000, ...load(50), readyReplicas: 5 },
      ]),
    ).toEqual([
      [4, ScaleReason.Load],
      [4, ScaleReason.Cooldown],
      [4, ScaleReason.Cooldown],
      [1, ScaleReason.Load],
      [5, ScaleReason.Load],
    ]);
  });

  it('scale to zero: min 0, no load for the cooldown → 0; the next load → 1 at once', () => {
    const s = spec({ cooldownSeconds: 60 });
    expect(
      run(s, [
        { at: 0, stableConcurrency: 1, panicConcurrency: 0, currentReplicas: 1 },
        { at: 2_000 },
        { at: 59_000 },
        { at: 60_000 },
        { at: 64_000, stableConcurrency: 0.01, panicConcurrency: 0.1, readyReplicas: 0 },
      ]),
    ).toEqual([
      [1, ScaleReason.Load],
      [1, ScaleReason.Cooldown],
      [1, ScaleReason.Cooldown],
      [0, ScaleReason.Idle],
      [1, ScaleReason.Load],
    ]);
  });

  it('panic does not scale down, and ends one stable window after the last burst', () => {
    const s = spec();
    const ticks = run(s, [
      { at: 0, stableConcurrency: 10, panicConcurrency: 60, currentReplicas: 2 },
      { at: 2_000, stableConcurrency: 12, panicConcurrency: 5, readyReplicas: 6 },
      { at: 40_000, stableConcurrency: 12, panicConcurrency: 5, readyReplicas: 6 },
      { at: 60_000, stableConcurrency: 12, panicConcurrency: 5, readyReplicas: 6 },
    ]);
    expect(ticks).toEqual([
      [6, ScaleReason.Panic],
      [6, ScaleReason.Panic],
      [6, ScaleReason.Panic],
      [2, ScaleReason.Load],
    ]);
  });

  it('panic keeps the highest count of the panic and grows from there', () => {
    const ticks = run(spec(), [
      { at: 0, stableConcurrency: 5, panicConcurrency: 30, currentReplicas: 1 },
      { at: 2_000, stableConcurrency: 8, panicConcurrency: 10, readyReplicas: 3 },
      { at: 4_000, stableConcurrency: 10, panicConcurrency: 70, readyReplicas: 3 },
    ]);
    expect(ticks).toEqual([
      [3, ScaleReason.Panic],
      [3, ScaleReason.Panic],
      [7, ScaleReason.Panic],
    ]);
  });

  it('a new autoscaler does not scale down before one stable window of history', () => {
    const fresh = initialState(T0);
    expect(
      run(
        spec(),
        [
          { at: 0, currentReplicas: 4 },
          { at: 59_000 },
          { at: 60_000 },
          { at: 61_000, stableConcurrency: 50, panicConcurrency: 50, readyReplicas: 5 },
        ],
        fresh,
      ),
    ).toEqual([
      [4, ScaleReason.WarmingUp],
      [4, ScaleReason.WarmingUp],
      [0, ScaleReason.Idle],
      [5, ScaleReason.Load],
    ]);
  });

  it('a lowered maxReplicas applies at once, even inside the cooldown', () => {
    const s = spec({ cooldownSeconds: 60 });
    let state = warm;
    const busy = { stableConcurrency: 80, panicConcurrency: 80, currentReplicas: 8, readyReplicas: 8 };
    const first = decide(s, obs(busy), state);
    state = first.state;
    const lowered = decide({ ...s, maxReplicas: 3 }, obs({ ...busy, now: T0 + 2_000 }), state);
    expect([first.replicas, lowered.replicas, lowered.reason]).toEqual([8, 3, ScaleReason.MaxReplicas]);
  });
});
