/**
 * Loaded into the benchmark gateway with `--import` by bench/accept-tail.ts and bench/sync-tail.ts (never
 * by a real gateway): each HTTP request's start and finish (node's `http.server.*` diagnostics channels),
 * each upstream call undici makes (`undici:request:create` → `undici:request:headers`), paired with the
 * request that started last, each GC with its pause, and each time the event loop
 * ran a 5 ms timer more than 1 ms late (with perf_hooks.monitorEventLoopDelay's summary), in µs of
 * CLOCK_MONOTONIC, written as JSON to `$ACCEPT_TAIL_FILE` when the process exits. Preallocated: nothing
 * is allocated per request apart from undici's channel messages.
 */
import { subscribe } from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver, performance } from 'node:perf_hooks';

/** At most this many requests (and upstream calls, and loop stalls) are recorded. */
const MAX_REQUESTS = 2_000_000;
const MAX_STALLS = 200_000;
/** The loop-stall timer's period, and how late it must run to count as a stall (µs). */
const TICK_MS = 5;
const STALL_US = 1000;
const FILE = process.env.ACCEPT_TAIL_FILE;
const times = new Float64Array(MAX_REQUESTS * 2);
const upstream = new Float64Array(MAX_REQUESTS * 3);
const stalls = new Float64Array(MAX_STALLS * 2);
const START = Symbol('acceptTailStart');
const UPSTREAM = Symbol('acceptTailUpstream');
let n = 0;
let u = 0;
let s = 0;
let unpaired = 0;
/**
 * The request that started last and has no upstream call yet (-1: none). A small body arrives with its
 * head, and the gateway dispatches a normal call in the turn it started (after microtasks at most), so
 * the next upstream call is that request's; a call dispatched later (a body still arriving) is not paired.
 */
let current = -1;
const monoUs = () => Number(process.hrtime.bigint() / 1000n);
// performance.now() and hrtime are the same clock from different origins.
const originUs = monoUs() - performance.now() * 1000;

type Req = { [START]?: number; [UPSTREAM]?: number };
subscribe('http.server.request.start', (m) => {
  if (n >= MAX_REQUESTS) return;
  (m as { request: Req }).request[START] = n;
  current = n;
  times[n++ * 2] = monoUs();
});
subscribe('http.server.response.finish', (m) => {
  const i = (m as { request: Req }).request[START];
  if (i !== undefined) times[i * 2 + 1] = monoUs();
});
subscribe('undici:request:create', (m) => {
  if (current < 0 || u >= MAX_REQUESTS) {
    unpaired++;
    return;
  }
  (m as { request: Req }).request[UPSTREAM] = u;
  upstream[u * 3] = current;
  upstream[u++ * 3 + 1] = monoUs();
  current = -1;
});
subscribe('undici:request:headers', (m) => {
  const i = (m as { request: Req }).request[UPSTREAM];
  if (i !== undefined) upstream[i * 3 + 2] = monoUs();
});

/** [start µs, pause µs, kind (1 scavenge, 4 mark-compact, 8 incremental marking, 16 weak callbacks)] */
const gcs: number[][] = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcs.push([
      originUs + e.startTime * 1000,
      e.duration * 1000,
      (e as { detail?: { kind?: number } }).detail?.kind ?? 0,
    ]);
  }
}).observe({ entryTypes: ['gc'] });

const delay = monitorEventLoopDelay({ resolution: TICK_MS });
delay.enable();
let due = monoUs() + TICK_MS * 1000;
setInterval(() => {
  const now = monoUs();
  if (now - due > STALL_US && s < MAX_STALLS) {
    stalls[s * 2] = due;
    stalls[s++ * 2 + 1] = now;
  }
  due = now + TICK_MS * 1000;
}, TICK_MS).unref();

process.on('exit', () => {
  if (!FILE) return;
  // The histogram holds each timer turn's whole interval: what the loop added is the rest.
  const ms = (ns: number) => Math.max(0, ns / 1e6 - TICK_MS);
  writeFileSync(
    FILE,
    JSON.stringify({
      requests: Array.from(times.subarray(0, n * 2)),
      upstream: Array.from(upstream.subarray(0, u * 3)),
      unpaired,
      gcs,
      stalls: Array.from(stalls.subarray(0, s * 2)),
      loopDelay: { p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max) },
    }),
  );
});
