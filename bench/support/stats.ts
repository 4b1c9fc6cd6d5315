/** Small numeric helpers for the benchmark figures. */

/** The p-th percentile (0..100) of `values` by nearest rank; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] as number;
}

export const median = (values: readonly number[]): number => percentile(values, 50);

/** Milliseconds with a precision that suits their size. */
export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return 'n/a';
  if (ms < 10) return `${ms.toFixed(2)} ms`;
  if (ms < 100) return `${ms.toFixed(1)} ms`;
  return `${Math.round(ms)} ms`;
}

/** CPU milliseconds per call, to the microsecond. */
export function fmtCpuMs(ms: number): string {
  return Number.isFinite(ms) ? `${ms.toFixed(3)} ms` : 'n/a';
}

export function fmtRate(perSecond: number, unit: string): string {
  if (!Number.isFinite(perSecond)) return 'n/a';
  return `${Math.round(perSecond).toLocaleString('en-US')} ${unit}`;
}

/** `a / b` as `×0.42`, or n/a when either side is missing. */
export function fmtRatio(a: number, b: number): string {
  if (!Number.isFinite(a) || !Number.isFinite(b) || b === 0) return 'n/a';
  return `×${(a / b).toFixed(2)}`;
}

export function fmtBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return 'n/a';
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
