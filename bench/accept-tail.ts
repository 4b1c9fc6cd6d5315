/**
 * `node bench/accept-tail.ts`: where the 202's tail comes from. The async accept load (wrk, c=32, as
 * `bench/run.ts async`) against the benchmark gateway with bench/support/accept-probe.ts loaded (each
 * request's time inside the gateway and every GC pause) and nats-server with `GODEBUG=gctrace=1` (every
 * GC cycle in its log). Prints wrk's figures, the gateway's own p50/p99, and which share of the slowest
 * 1% of accepts overlapped a gateway GC, a nats-server GC cycle, or either, with the p99 of the accepts
 * that overlapped none; the gateway's CPU per accept, scavenges and mark-compacts per 10,000 accepts and
 * peak RSS (VmHWM, warm-up included), and with
 * `ACCEPT_TAIL_NODE_ARGS=--trace-gc-nvp` the bytes its scavenges promoted per request; nats-server's env
 * (the chart's nats.bundled.goRuntime), CPU per accept and peak RSS. Settings: ACCEPT_TAIL_SECONDS (8), ACCEPT_TAIL_WARMUP_SECONDS (3),
 * BENCH_CONNECTIONS (32), ACCEPT_TAIL_NODE_ARGS (more gateway flags, after the chart's),
 * ACCEPT_TAIL_DATA_PLANE (node; `native`: the gateway as `make bench`'s native 202 row runs it, build/bin's
 * data plane on its port handing the async connections to Node whole, design §3a; the data plane's CPU per
 * accept is then printed beside Node's). Also printed: the event loop's late turns (a 5 ms timer over 1 ms
 * late) in the window, and the share of the slowest 1% that overlapped one on no GC pause. Nothing is
 * written to RESULTS.md. Take the bench lock (docs/benchmarks.md#where-the-202s-tail-comes-from-issue-16-eighth-round).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pickLoadGenerator } from './support/load.ts';
import {
  APP,
  chartNatsEnv,
  natsServerPid,
  PROJECT,
  procCpuSeconds,
  procStatusBytes,
  REPO_ROOT,
  treeCpuSeconds,
  writeSyscalls,
} from './support/parts.ts';
import { envNumber, loadAverageNow } from './support/report.ts';
import { fmtBytes, fmtMs, fmtRate, percentile } from './support/stats.ts';
import {
  monoUs,
  natsGcSpans,
  overlapsAny,
  probedParts,
  readProbe,
  type Span,
  share,
  spanMs,
} from './support/tail.ts';
import { ECHO_BODY } from './sync-overhead.ts';

const SECONDS = envNumber('ACCEPT_TAIL_SECONDS', 8);
const WARMUP = envNumber('ACCEPT_TAIL_WARMUP_SECONDS', 3);
const CONNECTIONS = envNumber('BENCH_CONNECTIONS', 32);
const NATIVE = (process.env.ACCEPT_TAIL_DATA_PLANE ?? 'node') === 'native';

const { parts, probeFile } = probedParts('accept-tail', 'ACCEPT_TAIL_NODE_ARGS');
const loadGen = pickLoadGenerator(REPO_ROOT, process.env.BENCH_LOAD_TOOL);
let natsLog = '';
let window: Span = { start: 0, end: 0 };
const wallToMonoUs = monoUs() - Date.now() * 1000;
const load0 = loadAverageNow();
let x: Awaited<ReturnType<typeof loadGen.run>>;
let natsPeak = 0;
let gwPeak = 0;
let cpu = 0;
let dataPlaneCpu = 0;
let writes = 0;
let gatewayLog = '';
let natsCpuMs = 0;
try {
  // nats-server (started by the harness with this environment) prints each GC cycle to its log; only it.
  process.env.GODEBUG = 'gctrace=1';
  const nats = await parts.nats();
  delete process.env.GODEBUG;
  const [gw, token] = await Promise.all([NATIVE ? parts.gatewayNative() : parts.gateway(), parts.token()]);
  const spec = {
    url: `${gw.url}/v4/${PROJECT}/${APP}/echo?async=true`,
    method: 'POST' as const,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: ECHO_BODY,
    connections: CONNECTIONS,
    durationSeconds: WARMUP,
  };
  if (WARMUP > 0) await loadGen.run(spec);
  const natsPid = natsServerPid(nats.port);
  const cpu0 = procCpuSeconds(natsPid);
  const gwCpu0 = procCpuSeconds(gw.pid);
  const treeCpu0 = treeCpuSeconds(gw.pid);
  const writes0 = writeSyscalls(gw.pid);
  window = { start: monoUs(), end: 0 };
  x = await loadGen.run({ ...spec, durationSeconds: SECONDS });
  cpu = procCpuSeconds(gw.pid) - gwCpu0;
  writes = writeSyscalls(gw.pid) - writes0;
  // Native mode: the data plane is Node's child; what the tree spent beyond Node is its.
  dataPlaneCpu = treeCpuSeconds(gw.pid) - treeCpu0 - cpu;
  window.end = monoUs();
  gwPeak = procStatusBytes(gw.pid, 'VmHWM');
  natsCpuMs = (procCpuSeconds(natsPid) - cpu0) * 1000;
  natsPeak = procStatusBytes(natsPid, 'VmHWM');
  natsLog = readFileSync(join(nats.dir, 'nats.log'), 'utf8');
} finally {
  await parts.stop();
}
gatewayLog = readFileSync(join(parts.logDir, NATIVE ? 'gateway-native.log' : 'gateway.log'), 'utf8');

const probe = readProbe(probeFile);
const accepts = probe.requests.filter((r) => r.start >= window.start && r.end > 0 && r.end <= window.end);
const ms = spanMs;
const gwGcs = probe.gcs;
const natsGcs = natsGcSpans(natsLog, wallToMonoUs);
const inWindow = <T extends Span>(xs: T[]) =>
  xs.filter((s) => s.start >= window.start && s.start <= window.end);
const p99 = percentile(accepts.map(ms), 99);
const slowest = accepts.filter((a) => ms(a) >= p99);
const onGw = (s: Span) => overlapsAny(s, gwGcs);
const onNats = (s: Span) => overlapsAny(s, natsGcs);
const pauses = (kind: number) =>
  inWindow(gwGcs)
    .filter((g) => g.kind === kind)
    .map(ms);
const stalls = inWindow(probe.stalls);
const stallsNotGc = stalls.filter((t) => !overlapsAny(t, gwGcs));
const lines = [
  `load average ${load0} at the start, ${loadAverageNow()} at the end`,
  `wrk: ${fmtRate(x.rps, 'accepts/s')}, p50 ${fmtMs(x.p50Ms)}, p99 ${fmtMs(x.p99Ms)}, ${x.non2xx + x.errors} errors`,
  `inside the gateway (request in → 202 written), ${accepts.length} accepts: p50 ${fmtMs(percentile(accepts.map(ms), 50))}, ` +
    `p99 ${fmtMs(p99)}, max ${fmtMs(accepts.reduce((m, a) => Math.max(m, ms(a)), 0))}`,
  `gateway GC: ${pauses(1).length} scavenges (p50 ${fmtMs(percentile(pauses(1), 50))}, max ${fmtMs(Math.max(0, ...pauses(1)))}), ` +
    `${pauses(4).length} mark-compacts (p50 ${fmtMs(percentile(pauses(4), 50))}, max ${fmtMs(Math.max(0, ...pauses(4)))})`,
  `nats-server (${Object.entries(chartNatsEnv())
    .map(([k, v]) => `${k}=${v}`)
    .join(
      ' ',
    )}): CPU ${(natsCpuMs / Math.max(1, x.requests)).toFixed(3)} ms per accept, peak RSS ${fmtBytes(natsPeak)}`,
  `nats-server GC cycles: ${inWindow(natsGcs).length} (wall ${inWindow(natsGcs)
    .map((g) => ms(g).toFixed(0))
    .join(', ')} ms)`,
  `accepts overlapping a gateway GC pause: ${share(accepts, onGw)} of all, ${share(slowest, onGw)} of the slowest 1%`,
  `accepts overlapping a nats-server GC cycle: ${share(accepts, onNats)} of all, ${share(slowest, onNats)} of the slowest 1%`,
  `slowest 1% overlapping either: ${share(slowest, (s) => onGw(s) || onNats(s))}; p99 of the accepts overlapping neither: ` +
    fmtMs(percentile(accepts.filter((s) => !onGw(s) && !onNats(s)).map(ms), 99)),
  `gateway CPU per accept ${((cpu * 1000) / Math.max(1, accepts.length)).toFixed(3)} ms; ` +
    `mark-compacts per 10,000 accepts ${((pauses(4).length * 10_000) / Math.max(1, accepts.length)).toFixed(2)}; ` +
    `scavenges per 10,000 accepts ${((pauses(1).length * 10_000) / Math.max(1, accepts.length)).toFixed(1)}; peak RSS ${fmtBytes(gwPeak)}; ` +
    `write syscalls per accept ${(writes / Math.max(1, accepts.length)).toFixed(2)}`,
  `event loop: ${stalls.length} late turns > 1 ms in the window (${stallsNotGc.length} on no GC pause, ` +
    `max ${fmtMs(stallsNotGc.reduce((m, t) => Math.max(m, ms(t)), 0))}); slowest 1% overlapping one of those: ` +
    `${share(slowest, (s) => overlapsAny(s, stallsNotGc))}; monitorEventLoopDelay p99 ${fmtMs(probe.loopDelay.p99)} (whole life)`,
];
if (NATIVE)
  lines.push(
    `data plane CPU per accept ${((dataPlaneCpu * 1000) / Math.max(1, accepts.length)).toFixed(4)} ms (Node's above)`,
  );
// With ACCEPT_TAIL_NODE_ARGS=--trace-gc-nvp: what the scavenges promoted over the gateway's life (warm-up included).
const promoted = [...gatewayLog.matchAll(/\bgc=s\b.*?\bpromoted=(\d+)/g)].map((m) => Number(m[1]));
if (promoted.length > 0) {
  const bytes = promoted.reduce((a, b) => a + b, 0);
  lines.push(
    `promoted by ${promoted.length} scavenges: ${(bytes / 1e6).toFixed(1)} MB, ` +
      `${(bytes / Math.max(1, probe.requests.length)).toFixed(0)} bytes per request (warm-up included)`,
  );
}
process.stdout.write(`${lines.join('\n')}\n`);
