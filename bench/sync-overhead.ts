/**
 * (1) Sync overhead and (6) gateway memory: the echo function called directly on the Python runtime,
 * through nginx `proxy_pass` (when installed), through a bare Node proxy (node:http + undici, the floor
 * of what a Node proxy costs: bench/support/bare-proxy.ts), and through the gateway, at the same
 * concurrency with the same load generator. The variants are interleaved over `rounds` and the best round of each is kept.
 * The gateway's CPU per call comes from /proc/<pid>/stat around its measured runs; its peak RSS (VmHWM)
 * and heap figures are read right after its last run.
 */
import { join } from 'node:path';
import { type BenchContext, errorNote } from './support/context.ts';
import {
  IDLE_HEALTHZ_MS,
  IDLE_READYZ_MS,
  IDLE_SCRAPE_MS,
  type IdleReading,
  settleIdle,
} from './support/idle-traffic.ts';
import type { LoadResult, LoadSpec } from './support/load.ts';
import { type Nginx, startNginx } from './support/nginx.ts';
import {
  APP,
  addedRssBytes,
  PROJECT,
  procCpuSeconds,
  processTree,
  procStatusBytes,
  treeCpuSeconds,
  treeStatusBytes,
} from './support/parts.ts';
import { fmtBytes, fmtCpuMs, fmtMs, fmtRate, fmtRatio } from './support/stats.ts';

export const ECHO_BODY = JSON.stringify({ user: 'bench', n: 42, tags: ['a', 'b', 'c'] });

async function check(url: string, headers: Record<string, string>): Promise<void> {
  const res = await fetch(url, { method: 'POST', headers, body: ECHO_BODY });
  const text = await res.text();
  if (res.status !== 200 || JSON.stringify(JSON.parse(text)) !== ECHO_BODY) {
    throw new Error(`${url} answered ${res.status} ${text.slice(0, 200)}; expected the echo of the body`);
  }
}

/** Reads a few gauges of the gateway's /metrics (prom-client default metrics), in bytes. */
async function gatewayMemory(opsUrl: string): Promise<Record<string, number>> {
  const wanted = [
    'nodejs_heap_size_used_bytes',
    'nodejs_heap_size_total_bytes',
    'nodejs_external_memory_bytes',
  ];
  const out: Record<string, number> = {};
  try {
    const text = await (await fetch(`${opsUrl}/metrics`)).text();
    for (const line of text.split('\n')) {
      const [name, value] = line.split(' ');
      if (name && value && wanted.includes(name)) out[name] = Number(value);
    }
  } catch {
    // figures stay missing: the row says n/a
  }
  return out;
}

interface Variant {
  name: string;
  url: string;
  headers: Record<string, string>;
  best?: LoadResult;
  /** The pid whose CPU is measured (a gateway primary: its processes' CPU is added up). */
  pid?: number;
  /** Of which the primary's own (several processes). */
  primaryCpuMsPerRequest?: number;
  /** CPU ms per request of that process (tree) in the best round. */
  cpuMsPerRequest?: number;
}

export async function syncOverhead(ctx: BenchContext): Promise<void> {
  const { report, settings, load } = ctx;
  if (!load) {
    report.unavailable('sync', 'all', ctx.loadMissing ?? 'no load generator');
    return;
  }
  const [rt, gw, gw2, bare, token, native] = await Promise.all([
    ctx.parts.runtime(),
    ctx.parts.gateway(),
    ctx.parts.gatewayTwoProcesses(),
    ctx.parts.bareProxy(),
    ctx.parts.token(),
    // The same gateway with the Rust data plane on its port (docs/design/native-data-plane.md): a row of
    // its own until native is the default, so both stay measured in one run.
    ctx.parts.gatewayNative().catch((e: unknown) => e as Error),
  ]);
  if (native instanceof Error)
    report.unavailable('sync', 'gateway (native data plane) → runtime', native.message);
  const json = { 'content-type': 'application/json' };

  let nginx: Nginx | undefined;
  if (ctx.nginx) nginx = await startNginx(ctx.nginx, rt.port, join(ctx.parts.logDir, 'nginx'));
  else {
    report.unavailable(
      'sync',
      'nginx proxy_pass → runtime',
      'nginx is not installed (apt-get install -y nginx)',
    );
  }
  const direct: Variant = { name: 'direct runtime', url: `${rt.url}/echo`, headers: json };
  const viaNginx: Variant | undefined = nginx
    ? { name: 'nginx proxy_pass → runtime', url: `${nginx.url}/echo`, headers: json }
    : undefined;
  const viaBare: Variant = {
    name: 'bare Node proxy (node:http + undici) → runtime',
    url: `${bare.url}/echo`,
    headers: json,
    pid: bare.pid,
  };
  const viaGateway: Variant = {
    name: 'gateway → runtime',
    url: `${gw.url}/v4/${PROJECT}/${APP}/echo`,
    headers: { ...json, authorization: `Bearer ${token}` },
    pid: gw.pid,
  };
  // The same gateway as 2 processes on one port (APPHOST_GATEWAY_PROCESSES=2, issue 16 item 5).
  const viaGateway2: Variant = {
    name: 'gateway ×2 processes → runtime',
    url: `${gw2.url}/v4/${PROJECT}/${APP}/echo`,
    headers: viaGateway.headers,
    pid: gw2.pid,
  };
  // Node's pid: its CPU and memory are counted with its children's, so the data plane's are in.
  const viaNative: Variant | undefined =
    native instanceof Error
      ? undefined
      : {
          name: 'gateway (native data plane) → runtime',
          url: `${native.url}/v4/${PROJECT}/${APP}/echo`,
          headers: viaGateway.headers,
          pid: native.pid,
        };
  const variants = [
    direct,
    ...(viaNginx ? [viaNginx] : []),
    viaBare,
    viaGateway,
    viaGateway2,
    ...(viaNative ? [viaNative] : []),
  ];

  const spec = (v: Variant, durationSeconds: number): LoadSpec => ({
    url: v.url,
    method: 'POST',
    headers: v.headers,
    body: ECHO_BODY,
    connections: settings.connections,
    durationSeconds,
  });
  const rssBefore = procStatusBytes(gw.pid, 'VmRSS');
  // The native gateway's idle figure is the pod's: Node and the data plane added up (design §10, question 4).
  const rssBeforeNativeNode = viaNative?.pid ? procStatusBytes(viaNative.pid, 'VmRSS') : Number.NaN;
  const nativePid = viaNative?.pid ? processTree(viaNative.pid).find((p) => p !== viaNative.pid) : undefined;
  const dataPlaneAdds = viaNative?.pid && nativePid ? addedRssBytes(nativePid, viaNative.pid) : Number.NaN;
  // The same idle gateways again after a pod's idle traffic for settings.idleSettleSeconds: the figure at
  // `listening` comes before V8's first old-space collections and the code a running pod touches.
  let settled: { node: IdleReading; pod?: IdleReading } | undefined;
  if (settings.idleSettleSeconds > 0) {
    process.stdout.write(
      `    idle: ${settings.idleSettleSeconds} s of probes and scrapes before the settled reading\n`,
    );
    const nativeNode = viaNative?.pid;
    const [node, pod] = await settleIdle(
      [
        { opsUrl: gw.opsUrl, read: () => procStatusBytes(gw.pid, 'VmRSS') },
        ...(native instanceof Error || !nativeNode || !nativePid
          ? []
          : [
              {
                opsUrl: native.opsUrl,
                read: () => procStatusBytes(nativeNode, 'VmRSS') + addedRssBytes(nativePid, nativeNode),
              },
            ]),
      ],
      settings.idleSettleSeconds,
    );
    if (node) settled = { node, ...(pod ? { pod } : {}) };
  }
  const memBefore = await gatewayMemory(gw.opsUrl);
  try {
    for (const v of variants) await check(v.url, v.headers);
    for (let round = 0; round < settings.rounds; round++) {
      for (const v of variants) {
        if (settings.warmupSeconds > 0) await load.run(spec(v, settings.warmupSeconds));
        const cpu0 = v.pid ? treeCpuSeconds(v.pid) : Number.NaN;
        const primaryCpu0 = v.pid ? procCpuSeconds(v.pid) : Number.NaN;
        const r = await load.run(spec(v, settings.durationSeconds));
        process.stdout.write(
          `    round ${round + 1}/${settings.rounds}: ${v.name}: ${fmtRate(r.rps, 'req/s')}, p50 ${fmtMs(r.p50Ms)}, p99 ${fmtMs(r.p99Ms)}\n`,
        );
        if (!v.best || r.rps > v.best.rps) {
          v.best = r;
          if (v.pid) {
            v.cpuMsPerRequest = ((treeCpuSeconds(v.pid) - cpu0) * 1000) / r.requests;
            v.primaryCpuMsPerRequest = ((procCpuSeconds(v.pid) - primaryCpu0) * 1000) / r.requests;
          }
        }
      }
    }
  } finally {
    await nginx?.stop();
  }
  const peak = procStatusBytes(gw.pid, 'VmHWM');
  const peak2 = treeStatusBytes(gw2.pid, 'VmHWM');
  const peakNative = viaNative?.pid ? treeStatusBytes(viaNative.pid, 'VmHWM') : Number.NaN;
  const rssAfter = procStatusBytes(gw.pid, 'VmRSS');
  const mem = await gatewayMemory(gw.opsUrl);

  for (const v of variants) {
    const r = v.best as LoadResult;
    report.row({
      benchmark: 'sync',
      variant: v.name,
      throughput: fmtRate(r.rps, 'req/s'),
      p50: fmtMs(r.p50Ms),
      p99: fmtMs(r.p99Ms),
      other: `c=${settings.connections}, ${r.requests} requests, best of ${settings.rounds} × ${settings.durationSeconds} s${errorNote(r)}`,
    });
  }
  report.row({
    benchmark: 'sync',
    variant: 'gateway CPU per request',
    other: `≈${fmtCpuMs(viaGateway.cpuMsPerRequest ?? Number.NaN)} of gateway CPU (user+system, /proc/<pid>/stat) per call`,
  });
  report.row({
    benchmark: 'sync',
    variant: 'bare Node proxy CPU per request',
    other: `≈${fmtCpuMs(viaBare.cpuMsPerRequest ?? Number.NaN)} of the bare proxy's CPU per call (the floor of a Node proxy: node:http + undici, nothing else)`,
  });
  const g2 = viaGateway2.best as LoadResult;
  report.row({
    benchmark: 'sync',
    variant: 'gateway ×2 processes CPU per request',
    other:
      `≈${fmtCpuMs(viaGateway2.cpuMsPerRequest ?? Number.NaN)} of CPU per call, the primary and both processes added up ` +
      `(the primary's share ${fmtCpuMs(viaGateway2.primaryCpuMsPerRequest ?? Number.NaN)}; 1 process: ≈${fmtCpuMs(viaGateway.cpuMsPerRequest ?? Number.NaN)})`,
  });
  const g = viaGateway.best as LoadResult;
  report.row({
    benchmark: 'sync',
    variant: 'ratio gateway 2 processes/1 process',
    throughput: fmtRatio(g2.rps, g.rps),
    p50: fmtRatio(g2.p50Ms, g.p50Ms),
    p99: fmtRatio(g2.p99Ms, g.p99Ms),
    other: `${fmtRate(g2.rps, 'req/s')} vs ${fmtRate(g.rps, 'req/s')}, interleaved in the same rounds`,
  });
  for (const base of [direct, viaNginx]) {
    if (!base?.best) continue;
    const b = base.best;
    report.row({
      benchmark: 'sync',
      variant: `ratio gateway/${base === direct ? 'direct' : 'nginx'}`,
      throughput: fmtRatio(g.rps, b.rps),
      p50: fmtRatio(g.p50Ms, b.p50Ms),
      p99: fmtRatio(g.p99Ms, b.p99Ms),
      other: `added p50 ${fmtMs(g.p50Ms - b.p50Ms)}, p99 ${fmtMs(g.p99Ms - b.p99Ms)}`,
    });
  }
  if (!viaNginx) report.unavailable('sync', 'ratio gateway/nginx', 'no nginx row');
  if (viaNative?.best) {
    const n = viaNative.best;
    const nativeCpu = viaNative.cpuMsPerRequest ?? Number.NaN;
    report.row({
      benchmark: 'sync',
      variant: 'gateway (native data plane) CPU per request',
      other:
        `≈${fmtCpuMs(nativeCpu)} per call, Node and the data plane added up (Node's share ` +
        `${fmtCpuMs(viaNative.primaryCpuMsPerRequest ?? Number.NaN)}); node mode ≈${fmtCpuMs(viaGateway.cpuMsPerRequest ?? Number.NaN)}`,
    });
    for (const base of [direct, viaNginx]) {
      if (!base?.best) continue;
      const b = base.best;
      report.row({
        benchmark: 'sync',
        variant: `ratio gateway (native data plane)/${base === direct ? 'direct' : 'nginx'}`,
        throughput: fmtRatio(n.rps, b.rps),
        p50: fmtRatio(n.p50Ms, b.p50Ms),
        p99: fmtRatio(n.p99Ms, b.p99Ms),
        other: `added p50 ${fmtMs(n.p50Ms - b.p50Ms)}, p99 ${fmtMs(n.p99Ms - b.p99Ms)}`,
      });
    }
  }
  const b = viaBare.best as LoadResult;
  const gatewayCpu = viaGateway.cpuMsPerRequest ?? Number.NaN;
  const bareCpu = viaBare.cpuMsPerRequest ?? Number.NaN;
  report.row({
    benchmark: 'sync',
    variant: 'ratio gateway/bare Node proxy',
    throughput: fmtRatio(g.rps, b.rps),
    p50: fmtRatio(g.p50Ms, b.p50Ms),
    p99: fmtRatio(g.p99Ms, b.p99Ms),
    other:
      `CPU per call ${fmtRatio(gatewayCpu, bareCpu)} (${fmtCpuMs(gatewayCpu)} vs ${fmtCpuMs(bareCpu)}: ` +
      `${fmtCpuMs(gatewayCpu - bareCpu)} of the gateway's own work per call); added p50 ${fmtMs(g.p50Ms - b.p50Ms)}, p99 ${fmtMs(g.p99Ms - b.p99Ms)}`,
  });

  // One connection: the latency a single caller sees, without queueing behind 31 others.
  const single = async (v: Variant) =>
    load.run({ ...spec(v, Math.max(1, Math.ceil(settings.durationSeconds / 2))), connections: 1 });
  const d1 = await single(direct);
  const b1 = await single(viaBare);
  const g1 = await single(viaGateway);
  const n1 = viaNative ? await single(viaNative) : undefined;
  for (const [name, r] of [
    ['direct runtime, 1 connection', d1],
    ['bare Node proxy → runtime, 1 connection', b1],
    ['gateway → runtime, 1 connection', g1],
    ...(n1 ? ([['gateway (native data plane) → runtime, 1 connection', n1]] as const) : []),
  ] as const) {
    report.row({
      benchmark: 'sync',
      variant: name,
      throughput: fmtRate(r.rps, 'req/s'),
      p50: fmtMs(r.p50Ms),
      p99: fmtMs(r.p99Ms),
      other:
        r === d1
          ? `${r.requests} requests${errorNote(r)}`
          : `added p50 ${fmtMs(r.p50Ms - d1.p50Ms)}, p99 ${fmtMs(r.p99Ms - d1.p99Ms)}${r === g1 ? ` (to the bare proxy: p50 ${fmtMs(g1.p50Ms - b1.p50Ms)})` : ''}${errorNote(r)}`,
    });
  }

  const heap = (k: string, m = mem) => fmtBytes(m[k] ?? Number.NaN);
  report.row({
    benchmark: 'memory',
    variant: 'gateway peak RSS (VmHWM)',
    other:
      `peak ${fmtBytes(peak)} at the sync load (c=${settings.connections}); RSS ${fmtBytes(rssBefore)} before, ${fmtBytes(rssAfter)} after; ` +
      `V8 heap ${heap('nodejs_heap_size_used_bytes')} used of ${heap('nodejs_heap_size_total_bytes')}, external ${heap('nodejs_external_memory_bytes')} after ` +
      `(before: ${heap('nodejs_heap_size_used_bytes', memBefore)} used of ${heap('nodejs_heap_size_total_bytes', memBefore)})`,
  });
  report.row({
    benchmark: 'memory',
    variant: 'gateway ×2 processes peak RSS',
    other: `${fmtBytes(peak2)}: VmHWM of the primary and its 2 processes added up, at the same load (the primary's ${fmtBytes(procStatusBytes(gw2.pid, 'VmHWM'))}; 1 process: ${fmtBytes(peak)})`,
  });
  if (viaNative?.pid) {
    report.row({
      benchmark: 'memory',
      variant: 'gateway (native data plane) peak RSS',
      other:
        `${fmtBytes(peakNative)}: VmHWM of Node and the data plane added up, at the same load (Node's ${fmtBytes(procStatusBytes(viaNative.pid, 'VmHWM'))}; node mode: ${fmtBytes(peak)}); ` +
        `before the load: Node's RSS ${fmtBytes(rssBeforeNativeNode)} + the data plane's own pages ${fmtBytes(dataPlaneAdds)} (anonymous, and files Node does not map) = ${fmtBytes(rssBeforeNativeNode + dataPlaneAdds)}, the pod's idle at \`listening\``,
    });
  }
  const idleTraffic =
    `/readyz every ${IDLE_READYZ_MS / 1000} s, /healthz every ${IDLE_HEALTHZ_MS / 1000} s, ` +
    `/metrics every ${IDLE_SCRAPE_MS / 1000} s`;
  const range = (r: IdleReading) => `${fmtBytes(r.min)}–${fmtBytes(r.max)}`;
  if (settled?.pod) {
    report.row({
      benchmark: 'memory',
      variant: 'gateway (native data plane) idle, settled',
      other:
        `${fmtBytes(settled.pod.end)} (Node's RSS + the data plane's own pages) after ${settings.idleSettleSeconds} s idle ` +
        `with a pod's idle traffic (${idleTraffic}); ${range(settled.pod)} over its second half; at \`listening\` ${fmtBytes(rssBeforeNativeNode + dataPlaneAdds)}`,
    });
  }
  if (settled) {
    report.row({
      benchmark: 'memory',
      variant: 'gateway idle, settled',
      other:
        `${fmtBytes(settled.node.end)} RSS after the same ${settings.idleSettleSeconds} s (node mode); ` +
        `${range(settled.node)} over its second half; at \`listening\` ${fmtBytes(rssBefore)}`,
    });
  }
}
