/**
 * (1) Sync overhead and (6) gateway memory: the echo function called directly on the Python runtime,
 * through nginx `proxy_pass` (when installed), and through the gateway, at the same concurrency with the
 * same load generator. Peak RSS of the gateway process (VmHWM) is read right after its row.
 */
import { join } from 'node:path';
import { type BenchContext, errorNote } from './support/context.ts';
import type { LoadResult, LoadSpec } from './support/load.ts';
import { startNginx } from './support/nginx.ts';
import { APP, PROJECT, procCpuSeconds, procStatusBytes } from './support/parts.ts';
import { fmtBytes, fmtMs, fmtRate, fmtRatio } from './support/stats.ts';

export const ECHO_BODY = JSON.stringify({ user: 'bench', n: 42, tags: ['a', 'b', 'c'] });

async function check(url: string, headers: Record<string, string>): Promise<void> {
  const res = await fetch(url, { method: 'POST', headers, body: ECHO_BODY });
  const text = await res.text();
  if (res.status !== 200 || JSON.stringify(JSON.parse(text)) !== ECHO_BODY) {
    throw new Error(`${url} answered ${res.status} ${text.slice(0, 200)}; expected the echo of the body`);
  }
}

export async function syncOverhead(ctx: BenchContext): Promise<void> {
  const { report, settings, load } = ctx;
  if (!load) {
    report.unavailable('sync', 'all', ctx.loadMissing ?? 'no load generator');
    return;
  }
  const [rt, gw, token] = await Promise.all([ctx.parts.runtime(), ctx.parts.gateway(), ctx.parts.token()]);
  const json = { 'content-type': 'application/json' };
  const gwHeaders = { ...json, authorization: `Bearer ${token}` };

  const spec = (url: string, headers: Record<string, string>, durationSeconds: number): LoadSpec => ({
    url,
    method: 'POST',
    headers,
    body: ECHO_BODY,
    connections: settings.connections,
    durationSeconds,
  });
  const warm = async (url: string, headers: Record<string, string>) => {
    await check(url, headers);
    if (settings.warmupSeconds > 0) await load.run(spec(url, headers, settings.warmupSeconds));
  };
  const measure = async (url: string, headers: Record<string, string>): Promise<LoadResult> => {
    await warm(url, headers);
    return load.run(spec(url, headers, settings.durationSeconds));
  };
  const row = (variant: string, r: LoadResult) =>
    report.row({
      benchmark: 'sync',
      variant,
      throughput: fmtRate(r.rps, 'req/s'),
      p50: fmtMs(r.p50Ms),
      p99: fmtMs(r.p99Ms),
      other: `c=${settings.connections}, ${r.requests} requests${errorNote(r)}`,
    });

  const direct = await measure(`${rt.url}/echo`, json);
  row('direct runtime', direct);

  let viaNginx: LoadResult | undefined;
  if (ctx.nginx) {
    const nginx = await startNginx(ctx.nginx, rt.port, join(ctx.parts.logDir, 'nginx'));
    try {
      viaNginx = await measure(`${nginx.url}/echo`, json);
      row('nginx proxy_pass → runtime', viaNginx);
    } finally {
      await nginx.stop();
    }
  } else {
    report.unavailable(
      'sync',
      'nginx proxy_pass → runtime',
      'nginx is not installed (apt-get install -y nginx)',
    );
  }

  const rssBefore = procStatusBytes(gw.pid, 'VmRSS');
  const gwUrl = `${gw.url}/v4/${PROJECT}/${APP}/echo`;
  await warm(gwUrl, gwHeaders);
  const cpuBefore = procCpuSeconds(gw.pid);
  const viaGateway = await load.run(spec(gwUrl, gwHeaders, settings.durationSeconds));
  const cpuPerRequestMs = ((procCpuSeconds(gw.pid) - cpuBefore) * 1000) / viaGateway.requests;
  const peak = procStatusBytes(gw.pid, 'VmHWM');
  const rssAfter = procStatusBytes(gw.pid, 'VmRSS');
  row('gateway → runtime', viaGateway);

  const ratios = (variant: string, base: LoadResult) =>
    report.row({
      benchmark: 'sync',
      variant,
      throughput: fmtRatio(viaGateway.rps, base.rps),
      p50: fmtRatio(viaGateway.p50Ms, base.p50Ms),
      p99: fmtRatio(viaGateway.p99Ms, base.p99Ms),
      other: `added p50 ${fmtMs(viaGateway.p50Ms - base.p50Ms)}`,
    });
  report.row({
    benchmark: 'sync',
    variant: 'gateway CPU per request',
    other: `≈${fmtMs(cpuPerRequestMs)} of gateway CPU (user+system) per call, from /proc/<pid>/stat`,
  });
  ratios('ratio gateway/direct', direct);
  if (viaNginx) ratios('ratio gateway/nginx', viaNginx);
  else report.unavailable('sync', 'ratio gateway/nginx', 'no nginx row');

  report.row({
    benchmark: 'memory',
    variant: 'gateway peak RSS (VmHWM)',
    other: `peak ${fmtBytes(peak)} during the sync gateway row; RSS ${fmtBytes(rssBefore)} before, ${fmtBytes(rssAfter)} after`,
  });
}
