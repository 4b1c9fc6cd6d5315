import { describe, expect, it } from 'vitest';
import { effectiveScaling } from '../apis/v1alpha1/scaling.ts';
import { Autoscaler, DEFAULT_AUTOSCALER_SETTINGS, describeDecision, type ScaledApp } from './autoscaler.ts';
import { ScaleReason } from './decider.ts';

const app = (over: Partial<ScaledApp> = {}): ScaledApp => ({
  key: 'p/a',
  scaling: effectiveScaling({
    minReplicas: 0,
    maxReplicas: 3,
    replicaConcurrency: 1,
    targetUtilization: 100,
    cooldownSeconds: 0,
  }),
  readyReplicas: 0,
  currentReplicas: 0,
  runsInStream: 0,
  ...over,
});
const load = (inflight: number, queued = 0) => ({
  projectId: 'p',
  appName: 'a',
  concurrency: inflight + queued,
  inflight,
  queued,
  runs: 0,
});

describe('Autoscaler', () => {
  it('a wake request (a call held at zero) gets one replica on the next decision', () => {
    const a = new Autoscaler();
    a.reports.recordApp('gw', load(0, 1), 0);
    const d = a.decide(app(), 0);
    expect([d.replicas, d.reason]).toEqual([1, ScaleReason.Load]);
    expect(describeDecision(d, 0)).toBe('p/a: 0 → 1 replicas (Load; observed 1, stable 1, panic 1)');
  });

  it('sums gateways, counts queued runs, and stops counting a silent gateway after the ttl', () => {
    const a = new Autoscaler({ ...DEFAULT_AUTOSCALER_SETTINGS, stableWindowMs: 4_000, panicWindowMs: 2_000 });
    a.reports.record({ v: 1, reporter: 'gw-1', intervalMs: 1_000, apps: [load(1)] }, 0);
    a.reports.record({ v: 1, reporter: 'gw-2', intervalMs: 1_000, apps: [load(1)] }, 0);
    expect(a.decide(app({ readyReplicas: 2, currentReplicas: 2, runsInStream: 1 }), 0).observed).toBe(3);
    // gw-2 died; gw-1 keeps reporting.
    a.reports.record({ v: 1, reporter: 'gw-1', intervalMs: 1_000, apps: [load(1)] }, 4_000);
    const d = a.decide(
      app({ readyReplicas: 3, currentReplicas: 3 }),
      DEFAULT_AUTOSCALER_SETTINGS.reportTtlMs,
    );
    expect(d.observed).toBe(1);
  });
});
