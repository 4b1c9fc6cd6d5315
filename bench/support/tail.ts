/**
 * What bench/accept-tail.ts and bench/sync-tail.ts share: intervals on CLOCK_MONOTONIC (µs), whether one
 * overlaps any of a sorted list, nats-server's GC cycles from its gctrace log, and what
 * bench/support/accept-probe.ts wrote from inside the benchmark gateway.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BENCH_DIR, createParts, type Parts } from './parts.ts';

/** An interval in µs of CLOCK_MONOTONIC. */
export interface Span {
  start: number;
  end: number;
}

export const monoUs = () => Number(process.hrtime.bigint() / 1000n);

/** The span's length in ms. */
export const spanMs = (s: Span) => (s.end - s.start) / 1000;

/**
 * nats-server's GC cycles from its gctrace lines (`gc 12 @3.456s 1%: a+b+c ms clock, …`), placed on the
 * monotonic clock: `@` counts from the process start, which the log's first line dates (wall clock, µs).
 */
export function natsGcSpans(log: string, wallToMonoUs: number): Span[] {
  const started = /\[\d+\] (\d{4})\/(\d\d)\/(\d\d) (\d\d:\d\d:\d\d\.\d+) \[INF\] Starting nats-server/.exec(
    log,
  );
  if (!started) return [];
  const startWallUs = Date.parse(`${started[1]}-${started[2]}-${started[3]}T${started[4]}Z`) * 1000;
  const spans: Span[] = [];
  for (const m of log.matchAll(/^gc \d+ @([\d.]+)s \d+%: ([\d.]+)\+([\d.]+)\+([\d.]+) ms clock/gm)) {
    const start = startWallUs + Number(m[1]) * 1e6 + wallToMonoUs;
    spans.push({ start, end: start + (Number(m[2]) + Number(m[3]) + Number(m[4])) * 1000 });
  }
  return spans;
}

/** Whether `s` overlaps any of `sorted` (sorted by start; each of them short). */
export function overlapsAny(s: Span, sorted: readonly Span[]): boolean {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((sorted[mid] as Span).start < s.end) lo = mid + 1;
    else hi = mid;
  }
  // Spans starting before s ends; GC pauses and loop stalls are short, so looking back a few suffices.
  for (let i = lo - 1; i >= 0 && i >= lo - 64; i--) if ((sorted[i] as Span).end > s.start) return true;
  return false;
}

/** A gateway GC pause: kind as node's PerformanceObserver gives it (1 scavenge, 4 mark-compact, …). */
export interface GcSpan extends Span {
  kind: number;
}

/** What the probe recorded in the gateway (see accept-probe.ts for the layout). */
export interface Probe {
  /** Per request: start, finish (µs), 0 when not seen. */
  requests: Span[];
  /** Per request with an upstream call paired to it: [upstream dispatched, upstream's head parsed] (µs). */
  upstream: Map<number, Span>;
  /** Requests whose upstream call could not be paired (dispatched in a later turn than the request started). */
  unpaired: number;
  gcs: GcSpan[];
  /** Times the event loop ran late (a 5 ms timer late by more than 1 ms): [when it was due, when it ran]. */
  stalls: Span[];
  /** perf_hooks.monitorEventLoopDelay over the process's life (ms beyond its 5 ms timer interval). */
  loopDelay: { p50: number; p99: number; max: number };
}

export function readProbe(file: string): Probe {
  const raw = JSON.parse(readFileSync(file, 'utf8')) as {
    requests: number[];
    upstream?: number[];
    unpaired?: number;
    gcs: number[][];
    stalls?: number[];
    loopDelay?: Probe['loopDelay'];
  };
  const requests: Span[] = [];
  for (let i = 0; i + 1 < raw.requests.length; i += 2)
    requests.push({ start: raw.requests[i] as number, end: raw.requests[i + 1] as number });
  const upstream = new Map<number, Span>();
  const up = raw.upstream ?? [];
  for (let i = 0; i + 2 < up.length; i += 3)
    upstream.set(up[i] as number, { start: up[i + 1] as number, end: up[i + 2] as number });
  const stalls: Span[] = [];
  const st = raw.stalls ?? [];
  for (let i = 0; i + 1 < st.length; i += 2)
    stalls.push({ start: st[i] as number, end: st[i + 1] as number });
  return {
    requests,
    upstream,
    unpaired: raw.unpaired ?? 0,
    gcs: raw.gcs
      .map(([start, pause, kind]) => ({
        start: start as number,
        end: (start as number) + (pause as number),
        kind: kind as number,
      }))
      .sort((a, b) => a.start - b.start),
    stalls: stalls.sort((a, b) => a.start - b.start),
    loopDelay: raw.loopDelay ?? { p50: Number.NaN, p99: Number.NaN, max: Number.NaN },
  };
}

/** `100 * matching / all` as "12.3%". */
export function share<T>(xs: readonly T[], pred: (x: T) => boolean): string {
  return `${((100 * xs.filter(pred).length) / Math.max(1, xs.length)).toFixed(1)}%`;
}

/**
 * The benchmark parts with accept-probe.ts loaded into the gateway (then the flags in `nodeArgsEnv`), and
 * the file the probe writes (`<tool>.json` in the parts' log directory).
 */
export function probedParts(tool: string, nodeArgsEnv: string): { parts: Parts; probeFile: string } {
  const extraArgs = (process.env[nodeArgsEnv] ?? '').split(' ').filter(Boolean);
  const parts = createParts({
    gatewayLogLevel: 'warn',
    gatewayNodeArgs: ['--import', join(BENCH_DIR, 'support', 'accept-probe.ts'), ...extraArgs],
  });
  const probeFile = join(parts.logDir, `${tool}.json`);
  process.env.ACCEPT_TAIL_FILE = probeFile;
  return { parts, probeFile };
}
