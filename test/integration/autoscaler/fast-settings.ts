import { DEFAULT_AUTOSCALER_SETTINGS } from '../../../src/autoscaler/autoscaler.ts';

/**
 * The autoscaler's loop at test speed: a tick every 200 ms, reports forgotten after 1 s and 1 s / 0.4 s
 * stable and panic windows, so a test sees decisions in seconds rather than the defaults' minutes.
 */
export const FAST_AUTOSCALER_SETTINGS = {
  ...DEFAULT_AUTOSCALER_SETTINGS,
  tickMs: 200,
  reportTtlMs: 1_000,
  stableWindowMs: 1_000,
  panicWindowMs: 400,
  runsCountTimeoutMs: 2_000,
};
