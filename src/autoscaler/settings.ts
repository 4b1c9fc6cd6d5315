/** The autoscaler's variables (docs/scaling.md), read by the operator and by `apphost dev`. */
import { z } from 'zod';
import { int } from '../shared/settings.ts';
import { DEFAULT_AUTOSCALER_SETTINGS } from './autoscaler.ts';
import type { AutoscalerLoopSettings } from './loop.ts';

export const DEFAULT_AUTOSCALER_LOOP_SETTINGS: AutoscalerLoopSettings = {
  ...DEFAULT_AUTOSCALER_SETTINGS,
  runsCountTimeoutMs: 2_000,
};

const D = DEFAULT_AUTOSCALER_LOOP_SETTINGS;

export const autoscalerEnv = {
  APPHOST_AUTOSCALER_TICK_MS: int(D.tickMs, { min: 100 }),
  APPHOST_AUTOSCALER_STABLE_WINDOW_MS: int(D.stableWindowMs, { min: 1000 }),
  APPHOST_AUTOSCALER_PANIC_WINDOW_MS: int(D.panicWindowMs, { min: 100 }),
  APPHOST_AUTOSCALER_PANIC_THRESHOLD_PERCENT: int(D.panicThreshold * 100, { min: 110 }),
  APPHOST_AUTOSCALER_REPORT_TTL_MS: int(D.reportTtlMs, { min: 100 }),
};
const AutoscalerEnv = z.object(autoscalerEnv);
type AutoscalerEnvValues = z.output<typeof AutoscalerEnv>;

/** The cross-field rule, as a refinement for each piece's schema. */
export const panicWithinStable: [(e: AutoscalerEnvValues) => boolean, { path: string[]; message: string }] = [
  (e) => e.APPHOST_AUTOSCALER_PANIC_WINDOW_MS <= e.APPHOST_AUTOSCALER_STABLE_WINDOW_MS,
  {
    path: ['APPHOST_AUTOSCALER_PANIC_WINDOW_MS'],
    message: 'must not be longer than APPHOST_AUTOSCALER_STABLE_WINDOW_MS',
  },
];

export function autoscalerSettings(e: AutoscalerEnvValues): AutoscalerLoopSettings {
  return {
    ...D,
    tickMs: e.APPHOST_AUTOSCALER_TICK_MS,
    stableWindowMs: e.APPHOST_AUTOSCALER_STABLE_WINDOW_MS,
    panicWindowMs: e.APPHOST_AUTOSCALER_PANIC_WINDOW_MS,
    panicThreshold: e.APPHOST_AUTOSCALER_PANIC_THRESHOLD_PERCENT / 100,
    reportTtlMs: e.APPHOST_AUTOSCALER_REPORT_TTL_MS,
  };
}
