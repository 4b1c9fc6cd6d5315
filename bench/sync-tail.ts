import { pickLoadGenerator } from './support/load.ts';
import { APP, PROJECT, REPO_ROOT } from './support/parts.ts';
import { envNumber, loadAverageNow } from './support/report.ts';
import { fmtMs, fmtRate, percentile } from './support/stats.ts';
import { monoUs, overlapsAny, probedParts, readProbe, type Span, share, spanMs } from './support/tail.ts';
import { ECHO_BODY } from './sync-overhead.ts';

const SECONDS = envNumber('SYNC_TAIL_SECONDS', 8);
const WARMUP = envNumber('SYNC_TAIL_WARMUP_SECONDS', 3);
const CONNECTIONS = envNumber('BENCH_CONNECTIONS', 32);

const { parts, probeFile } = probedParts('sync-tail', 'SYNC_TAIL_NODE_ARGS');
const loadGen = pickLoadGenerator(REPO_ROOT, process.env.BENCH_LOAD_TOOL);
let window: Span = { start: 0, end: 0 };
const load0 = loadAverageNow();
let viaGateway: Awaited<ReturnType<typeof loadGen.run>>;
let direct: Awaited<ReturnType<typeof loadGen.run>>;
try {
  const [rt, gw, token] = await Promise.all([parts.runtime(), parts.gateway(), parts.token()]);
  const json = { 'content-type': 'application/json' };
  const spec = (url: string, headers: Record<string, string>, durationSeconds: number) => ({
    url,
    method: 'POST' as const,
    headers,
    body: ECHO_BODY,
    connections: CONNECTIONS,
    durationSeconds,
  });
  const gwSpec = spec(
    `${gw.url}/v4/${PROJECT}/${APP}/echo`,
    { ...json, authorization: `Bearer ${token}` },
    SECONDS,
  );
  const directSpec = spec(`${rt.url}/echo`, json, SECONDS);
  if (WARMUP > 0) {
    await loadGen.run({ ...gwSpec, durationSeconds: WARMUP });
    await loadGen.run({ ...directSpec, durationSeconds: WARMUP });
  }
  window = { start: monoUs(), end: 0 };
  viaGateway = await loadGen.run(gwSpec);
  window.end = monoUs();
  direct = await loadGen.run(directSpec);
} finally {
  await parts.stop();
}

const probe = readProbe(probeFile);
const ids: number[] = [];
probe.requests.forEach((r, i) => {
  if (r.start >= window.start && r.end > 0 && r.end <= window.end) ids.push(i);
});
const callMs = (i: number) => spanMs(probe.requests[i] as Span);
const p99 = percentile(ids.map(callMs), 99);
const slowest = ids.filter((i) => callMs(i) >= p99);
const paired = ids.filter((i) => (probe.upstream.get(i)?.end ?? 0) > 0);

/** A call's three phases (ms): before the upstream call, the upstream call, after the upstream's head. */
const phases = (i: number) => {
  const r = probe.requests[i] as Span;
  const up = probe.upstream.get(i) as Span;
  return [(up.start - r.start) / 1000, (up.end - up.start) / 1000, (r.end - up.end) / 1000] as const;
};
const phaseNames = [
  'request in → upstream dispatched',
  'upstream call (dispatch → head parsed)',
  'head → answer written',
];
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const slowPaired = slowest.filter((i) => (probe.upstream.get(i)?.end ?? 0) > 0);
const phaseLines = phaseNames.map((name, k) => {
  const all = paired.map((i) => phases(i)[k] as number);
  const slow = slowPaired.map((i) => phases(i)[k] as number);
  return `  ${name}: p50 ${fmtMs(percentile(all, 50))}, p99 ${fmtMs(percentile(all, 99))}; mean in the slowest 1% ${fmtMs(mean(slow))}`;
});

const inWindow = <T extends Span>(xs: T[]) =>
  xs.filter((s) => s.start >= window.start && s.start <= window.end);
const pauses = (kind: number) =>
  inWindow(probe.gcs)
    .filter((g) => g.kind === kind)
    .map(spanMs);
const scavenges = probe.gcs.filter((g) => g.kind === 1);
const markCompacts = probe.gcs.filter((g) => g.kind === 4);
const stalls = inWindow(probe.stalls);
// A late turn that no GC pause explains: the loop was busy with JS (or waited for a core).
const stallsNotGc = stalls.filter((s) => !overlapsAny(s, probe.gcs));
const span = (i: number) => probe.requests[i] as Span;
const onScavenge = (i: number) => overlapsAny(span(i), scavenges);
const onMarkCompact = (i: number) => overlapsAny(span(i), markCompacts);
const onGc = (i: number) => overlapsAny(span(i), probe.gcs);
const onStall = (i: number) => overlapsAny(span(i), stallsNotGc);
const upstreamSlow = (i: number) => {
  const up = probe.upstream.get(i);
  return up !== undefined && up.end > 0 && (up.end - up.start) / 1000 >= callMs(i) / 2;
};

const lines = [
  `load average ${load0} at the start, ${loadAverageNow()} at the end`,
  `wrk → gateway: ${fmtRate(viaGateway.rps, 'req/s')}, p50 ${fmtMs(viaGateway.p50Ms)}, p99 ${fmtMs(viaGateway.p99Ms)}, ${viaGateway.non2xx + viaGateway.errors} errors`,
  `wrk → runtime directly: ${fmtRate(direct.rps, 'req/s')}, p50 ${fmtMs(direct.p50Ms)}, p99 ${fmtMs(direct.p99Ms)}; added p99 ${fmtMs(viaGateway.p99Ms - direct.p99Ms)}`,
  `inside the gateway (request in → answer written), ${ids.length} calls (${paired.length} with their upstream call paired, ${probe.unpaired} upstream calls unpaired): ` +
    `p50 ${fmtMs(percentile(ids.map(callMs), 50))}, p99 ${fmtMs(p99)}, max ${fmtMs(ids.reduce((m, id) => Math.max(m, callMs(id)), 0))}`,
  ...phaseLines,
  `gateway GC: ${pauses(1).length} scavenges (p50 ${fmtMs(percentile(pauses(1), 50))}, max ${fmtMs(Math.max(0, ...pauses(1)))}), ` +
    `${pauses(4).length} mark-compacts (p50 ${fmtMs(percentile(pauses(4), 50))}, max ${fmtMs(Math.max(0, ...pauses(4)))})`,
  `event loop: monitorEventLoopDelay p50 ${fmtMs(probe.loopDelay.p50)}, p99 ${fmtMs(probe.loopDelay.p99)}, max ${fmtMs(probe.loopDelay.max)} (whole life); ` +
    `${stalls.length} late turns > 1 ms in the window (${stallsNotGc.length} on no GC pause; p50 ${fmtMs(percentile(stallsNotGc.map(spanMs), 50))}, max ${fmtMs(Math.max(0, ...stallsNotGc.map(spanMs)))})`,
  `calls overlapping a GC pause: ${share(ids, onGc)} of all, ${share(slowest, onGc)} of the slowest 1% (scavenge ${share(slowest, onScavenge)}, mark-compact ${share(slowest, onMarkCompact)})`,
  `calls overlapping a late turn on no GC: ${share(ids, onStall)} of all, ${share(slowest, onStall)} of the slowest 1%`,
  `slowest 1% whose upstream call is half their time or more: ${share(slowPaired, upstreamSlow)}`,
  `slowest 1% overlapping either: ${share(slowest, (i) => onGc(i) || onStall(i))}; p99 of the calls overlapping neither: ` +
    fmtMs(percentile(ids.filter((i) => !onGc(i) && !onStall(i)).map(callMs), 99)),
];
process.stdout.write(`${lines.join('\n')}\n`);
