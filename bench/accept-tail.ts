/**
 * `node bench/accept-tail.ts`: where the 202's tail comes from. The async accept load (wrk, c=32, as
 * `bench/run.ts async`) against the benchmark gateway with bench/support/accept-probe.ts loaded (each
 * request's time inside the gateway and every GC pause) and nats-server with `GODEBUG=gctrace=1` (every
 * GC cycle in its log). Prints wrk's figures, the gateway's own p50/p99, and which share of the slowest
 * 1% of accepts overlapped a gateway GC, a nats-server GC cycle, or either, with the p99 of the accepts
 * that overlapped none; the gateway's CPU per accept and mark-compacts per 10,000 accepts, and with
 * `ACCEPT_TAIL_NODE_ARGS=--trace-gc-nvp` the bytes its scavenges promoted per request. Settings: ACCEPT_TAIL_SECONDS (8), ACCEPT_TAIL_WARMUP_SECONDS (3),
 * BENCH_CONNECTIONS (32), ACCEPT_TAIL_NODE_ARGS (more gateway flags, after the chart's). Nothing is
 * written to RESULTS.md. Take the bench lock (docs/benchmarks.md#where-the-202s-tail-comes-from-issue-16-eighth-round).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pickLoadGenerator } from './support/load.ts';
import { APP, BENCH_DIR, createParts, PROJECT, procCpuSeconds, REPO_ROOT } from './support/parts.ts';
import { loadAverageNow } from './support/report.ts';
import { fmtMs, fmtRate, percentile } from './support/stats.ts';
import { ECHO_BODY } from './sync-overhead.ts';

const num = (name: string, def: number) => Number(process.env[name] ?? def);
const SECONDS = num('ACCEPT_TAIL_SECONDS', 8);
const WARMUP = num('ACCEPT_TAIL_WARMUP_SECONDS', 3);
const CONNECTIONS = num('BENCH_CONNECTIONS', 32);
const extraArgs = (process.env.ACCEPT_TAIL_NODE_ARGS ?? '').split(' ').filter(Boolean);

/** An interval in µs of CLOCK_MONOTONIC. */
interface Span {
  start: number;
  end: number;
}

const monoUs = () => Number(process.hrtime.bigint() / 1000n);

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

/** Whether `s` overlaps any of `sorted` (sorted by start). */
function overlapsAny(s: Span, sorted: Span[]): boolean {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((sorted[mid] as Span).start < s.end) lo = mid + 1;
    else hi = mid;
  }
  // Spans starting before s ends; GC spans are short, so looking back a few suffices.
  for (let i = lo - 1; i >= 0 && i >= lo - 64; i--) if ((sorted[i] as Span).end > s.start) return true;
  return false;
}

const parts = createParts({
  gatewayLogLevel: 'warn',
  gatewayNodeArgs: ['--import', join(BENCH_DIR, 'support', 'accept-probe.ts'), ...extraArgs],
});
const probeFile = join(parts.logDir, 'accept-tail.json');
process.env.ACCEPT_TAIL_FILE = probeFile;
const loadGen = pickLoadGenerator(REPO_ROOT, process.env.BENCH_LOAD_TOOL);
let natsLog = '';
let window: Span = { start: 0, end: 0 };
let cpu = 0;
let gatewayLog = '';
const wallToMonoUs = monoUs() - Date.now() * 1000;
const load0 = loadAverageNow();
let x: Awaited<ReturnType<typeof loadGen.run>>;
try {
  // nats-server (started by the harness with this environment) prints each GC cycle to its log; only it.
  process.env.GODEBUG = 'gctrace=1';
  const nats = await parts.nats();
  delete process.env.GODEBUG;
  const [gw, token] = await Promise.all([parts.gateway(), parts.token()]);
  const spec = {
    url: `${gw.url}/v4/${PROJECT}/${APP}/echo?async=true`,
    method: 'POST' as const,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: ECHO_BODY,
    connections: CONNECTIONS,
    durationSeconds: WARMUP,
  };
  if (WARMUP > 0) await loadGen.run(spec);
  window = { start: monoUs(), end: 0 };
  const cpu0 = procCpuSeconds(gw.pid);
  x = await loadGen.run({ ...spec, durationSeconds: SECONDS });
  cpu = procCpuSeconds(gw.pid) - cpu0;
  window.end = monoUs();
  natsLog = readFileSync(join(nats.dir, 'nats.log'), 'utf8');
} finally {
  await parts.stop();
}
gatewayLog = readFileSync(join(parts.logDir, 'gateway.log'), 'utf8');

const probe = JSON.parse(readFileSync(probeFile, 'utf8')) as { requests: number[]; gcs: number[][] };
const accepts: Span[] = [];
for (let i = 0; i + 1 < probe.requests.length; i += 2) {
  const start = probe.requests[i] as number;
  const end = probe.requests[i + 1] as number;
  if (start >= window.start && end > 0 && end <= window.end) accepts.push({ start, end });
}
const ms = (s: Span) => (s.end - s.start) / 1000;
const gwGcs = probe.gcs
  .map(([start, pause, kind]) => ({
    start: start as number,
    end: (start as number) + (pause as number),
    kind,
  }))
  .sort((a, b) => a.start - b.start);
const natsGcs = natsGcSpans(natsLog, wallToMonoUs);
const inWindow = <T extends Span>(xs: T[]) =>
  xs.filter((s) => s.start >= window.start && s.start <= window.end);
const p99 = percentile(accepts.map(ms), 99);
const slowest = accepts.filter((a) => ms(a) >= p99);
const share = (xs: Span[], pred: (s: Span) => boolean) =>
  `${((100 * xs.filter(pred).length) / Math.max(1, xs.length)).toFixed(1)}%`;
const onGw = (s: Span) => overlapsAny(s, gwGcs);
const onNats = (s: Span) => overlapsAny(s, natsGcs);
const pauses = (kind: number) =>
  inWindow(gwGcs)
    .filter((g) => g.kind === kind)
    .map(ms);
const lines = [
  `load average ${load0} at the start, ${loadAverageNow()} at the end`,
  `wrk: ${fmtRate(x.rps, 'accepts/s')}, p50 ${fmtMs(x.p50Ms)}, p99 ${fmtMs(x.p99Ms)}, ${x.non2xx + x.errors} errors`,
  `inside the gateway (request in → 202 written), ${accepts.length} accepts: p50 ${fmtMs(percentile(accepts.map(ms), 50))}, ` +
    `p99 ${fmtMs(p99)}, max ${fmtMs(Math.max(...accepts.map(ms)))}`,
  `gateway GC: ${pauses(1).length} scavenges (p50 ${fmtMs(percentile(pauses(1), 50))}, max ${fmtMs(Math.max(0, ...pauses(1)))}), ` +
    `${pauses(4).length} mark-compacts (p50 ${fmtMs(percentile(pauses(4), 50))}, max ${fmtMs(Math.max(0, ...pauses(4)))})`,
  `nats-server GC cycles: ${inWindow(natsGcs).length} (wall ${inWindow(natsGcs)
    .map((g) => ms(g).toFixed(0))
    .join(', ')} ms)`,
  `accepts overlapping a gateway GC pause: ${share(accepts, onGw)} of all, ${share(slowest, onGw)} of the slowest 1%`,
  `accepts overlapping a nats-server GC cycle: ${share(accepts, onNats)} of all, ${share(slowest, onNats)} of the slowest 1%`,
  `slowest 1% overlapping either: ${share(slowest, (s) => onGw(s) || onNats(s))}; p99 of the accepts overlapping neither: ` +
    fmtMs(percentile(accepts.filter((s) => !onGw(s) && !onNats(s)).map(ms), 99)),
  `gateway CPU per accept ${((cpu * 1000) / Math.max(1, accepts.length)).toFixed(3)} ms; ` +
    `mark-compacts per 10,000 accepts ${((pauses(4).length * 10_000) / Math.max(1, accepts.length)).toFixed(2)}`,
];
// With ACCEPT_TAIL_NODE_ARGS=--trace-gc-nvp: what the scavenges promoted over the gateway's life (warm-up included).
const promoted = [...gatewayLog.matchAll(/\bgc=s\b.*?\bpromoted=(\d+)/g)].map((m) => Number(m[1]));
if (promoted.length > 0) {
  const bytes = promoted.reduce((a, b) => a + b, 0);
  lines.push(
    `promoted by ${promoted.length} scavenges: ${(bytes / 1e6).toFixed(1)} MB, ` +
      `${(bytes / Math.max(1, probe.requests.length / 2)).toFixed(0)} bytes per request (warm-up included)`,
  );
}
process.stdout.write(`${lines.join('\n')}\n`);
