/**
 * Loaded into the benchmark gateway with `--import` by bench/accept-tail.ts (never by a real gateway):
 * each HTTP request's start and finish (node's `http.server.*` diagnostics channels) and each GC with its
 * pause, in µs of CLOCK_MONOTONIC, written as JSON to `$ACCEPT_TAIL_FILE` when the process exits.
 */
import { subscribe } from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import { PerformanceObserver, performance } from 'node:perf_hooks';

/** At most this many requests are recorded (2 numbers each, preallocated: the probe allocates nothing per request). */
const MAX_REQUESTS = 2_000_000;
const FILE = process.env.ACCEPT_TAIL_FILE;
const times = new Float64Array(MAX_REQUESTS * 2);
const START = Symbol('acceptTailStart');
let n = 0;
const monoUs = () => Number(process.hrtime.bigint() / 1000n);
// performance.now() and hrtime are the same clock from different origins.
const originUs = monoUs() - performance.now() * 1000;

type Req = { [START]?: number };
subscribe('http.server.request.start', (m) => {
  if (n >= MAX_REQUESTS) return;
  (m as { request: Req }).request[START] = n;
  times[n++ * 2] = monoUs();
});
subscribe('http.server.response.finish', (m) => {
  const i = (m as { request: Req }).request[START];
  if (i !== undefined) times[i * 2 + 1] = monoUs();
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

process.on('exit', () => {
  if (FILE) writeFileSync(FILE, JSON.stringify({ requests: Array.from(times.subarray(0, n * 2)), gcs }));
});
