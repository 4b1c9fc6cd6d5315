/** Exponential backoff, the one formula for retries (failed reconciles and watches, crashed processes). */
export interface BackoffSettings {
  /** First retry delay. */
  baseDelayMs: number;
  /** Upper bound of the retry delay. */
  maxDelayMs: number;
}

/** base * 2^(failures-1), capped: the delay before the `failures`-th retry (0 before any failure). */
export function backoffDelay(failures: number, s: BackoffSettings): number {
  if (failures <= 0) return 0;
  return Math.min(s.maxDelayMs, s.baseDelayMs * 2 ** Math.min(failures - 1, 30));
}
