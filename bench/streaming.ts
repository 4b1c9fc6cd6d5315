/**
 * (3) Streaming: time to first event for a generator that yields at once, called directly on the
 * runtime, through nginx `proxy_pass` (unbuffered; when installed), through the bare Node proxy (the
 * floor: bench/support/bare-proxy.ts) and through the gateway. Sequential
 * requests on keep-alive connections, alternating the variants so that machine noise hits all alike, in
 * an order that rotates each time round (a call right after another variant's comes out faster or
 * slower by up to ~0.1 ms, so every variant takes every place equally often); the clock runs from
 * sending the request to the first `data:`.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import type { BenchContext } from './support/context.ts';
import { startNginx } from './support/nginx.ts';
import { APP, PROJECT } from './support/parts.ts';
import { fmtMs, fmtRatio, median, percentile } from './support/stats.ts';

/**
 * Unmeasured requests per variant first: connection set-up and the JIT of the stream path, which the
 * sync load before it does not warm (a streamed answer's body, pipe, chunked writes); the stages of one
 * streamed call take about half as long after a few hundred calls (docs/benchmarks.md, SSE seventh round).
 */
export const STREAM_WARMUP_REQUESTS = 300;
/** Bound on one streaming request. */
export const STREAM_REQUEST_TIMEOUT_MS = 30_000;

/** Time from sending `POST url` (Accept: text/event-stream) to the first `data:` of its answer, in ms. */
export async function timeToFirstEvent(
  dispatcher: Agent,
  url: string,
  headers: Record<string, string>,
): Promise<number> {
  const t0 = performance.now();
  const res = await request(url, {
    method: 'POST',
    headers: { ...headers, accept: 'text/event-stream', 'content-type': 'application/json' },
    body: '{}',
    dispatcher,
    headersTimeout: STREAM_REQUEST_TIMEOUT_MS,
    bodyTimeout: STREAM_REQUEST_TIMEOUT_MS,
  });
  if (res.statusCode !== 200 || !String(res.headers['content-type']).startsWith('text/event-stream')) {
    const text = await res.body.text();
    throw new Error(`${url} answered ${res.statusCode} ${text.slice(0, 200)}; expected an event stream`);
  }
  let seen = '';
  let first = Number.NaN;
  for await (const chunk of res.body) {
    seen += (chunk as Buffer).toString('utf8');
    if (Number.isNaN(first) && seen.includes('data:')) first = performance.now() - t0;
  }
  if (!seen.includes('data: {"i": 0}') && !seen.includes('data: {"i":0}')) {
    throw new Error(
      `${url} streamed ${JSON.stringify(seen.slice(0, 200))}; expected the first event {"i": 0}`,
    );
  }
  return first;
}

export async function streaming(ctx: BenchContext): Promise<void> {
  const { report, settings } = ctx;
  const [rt, gw, token, floor, native] = await Promise.all([
    ctx.parts.runtime(),
    ctx.parts.gateway(),
    ctx.parts.token(),
    ctx.parts.bareProxy(),
    // The Rust data plane (docs/design/native-data-plane.md) in the same rounds, as in the sync rows.
    ctx.parts.gatewayNative().catch((e: unknown) => e as Error),
  ]);
  if (native instanceof Error)
    report.unavailable('streaming', 'gateway (native data plane) → runtime', native.message);
  const nginx = ctx.nginx
    ? await startNginx(ctx.nginx, rt.port, join(ctx.parts.logDir, 'nginx-sse'))
    : undefined;
  const variants = [
    { name: 'direct runtime', url: `${rt.url}/first`, headers: {} as Record<string, string> },
    ...(nginx ? [{ name: 'nginx proxy_pass → runtime', url: `${nginx.url}/first`, headers: {} }] : []),
    // The floor: node:http + undici writing the event stream on, without the gateway's work.
    { name: 'bare Node proxy → runtime', url: `${floor.url}/first`, headers: {} },
    {
      name: 'gateway → runtime',
      url: `${gw.url}/v4/${PROJECT}/${APP}/first`,
      headers: { authorization: `Bearer ${token}` },
    },
    ...(native instanceof Error
      ? []
      : [
          {
            name: 'gateway (native data plane) → runtime',
            url: `${native.url}/v4/${PROJECT}/${APP}/first`,
            headers: { authorization: `Bearer ${token}` },
          },
        ]),
  ];
  const agent = new Agent({ keepAliveTimeout: 30_000, connections: 2 });
  const samples = variants.map(() => [] as number[]);
  try {
    for (let i = 0; i < STREAM_WARMUP_REQUESTS + settings.streamRequests; i++) {
      for (let j = 0; j < variants.length; j++) {
        const k = (i + j) % variants.length;
        const v = variants[k] as (typeof variants)[number];
        const ms = await timeToFirstEvent(agent, v.url, v.headers);
        if (i >= STREAM_WARMUP_REQUESTS) samples[k]?.push(ms);
      }
    }
  } finally {
    await agent.close();
    await nginx?.stop();
  }
  const medians = samples.map((s) => median(s));
  for (const [k, v] of variants.entries()) {
    const s = samples[k] ?? [];
    report.row({
      benchmark: 'streaming',
      variant: `time to first event, ${v.name}`,
      p50: fmtMs(median(s)),
      p99: fmtMs(percentile(s, 99)),
      other: `${s.length} sequential requests`,
    });
  }
  const at = (name: string) => medians[variants.findIndex((v) => v.name === name)] ?? Number.NaN;
  const bases = [
    ['direct runtime', 'direct'],
    ...(nginx ? [['nginx proxy_pass → runtime', 'nginx']] : []),
    ['bare Node proxy → runtime', 'bare Node proxy'],
  ];
  const gateways = [
    ['gateway → runtime', 'gateway'],
    ...(native instanceof Error
      ? []
      : [['gateway (native data plane) → runtime', 'gateway (native data plane)']]),
  ];
  for (const [gateway = '', label = ''] of gateways)
    for (const [base = '', short = ''] of bases)
      report.row({
        benchmark: 'streaming',
        variant: `ratio ${label}/${short}`,
        p50: fmtRatio(at(gateway), at(base)),
        other: `added ${fmtMs(at(gateway) - at(base))} to the median`,
      });
}
