/**
 * `node bench/compare.ts <variant> <variant> ...`: the gateway of several commits (or of one commit with
 * different node flags) against one runtime and one NATS server, under the sync load, with the rounds
 * interleaved (the order reversed every other round) so a burst of other work on the machine hits every
 * variant alike. A variant is `<name>=<commit>[:<node flags>]`, e.g.
 * `before=5976733 after=HEAD after-semi8=HEAD:--max-semi-space-size=8`; each commit's `src/` and `bench/`
 * are exported (`git archive`) into a temp directory that uses this checkout's node_modules.
 * Prints per round each variant's req/s, p50/p99 and gateway CPU per call (/proc/<pid>/stat), then SSE
 * time to first event (sequential, alternating with the direct runtime, the order rotating each time round), and per variant the median CPU
 * per call, peak RSS (VmHWM) and its V8 heap spaces after the load. Nothing is written to RESULTS.md.
 * With COMPARE_ASYNC_ROUNDS > 0, then as many interleaved rounds of the async load (`?async=true`, 202
 * accepts; the run worker is off, so RUNS only grows) with each variant's accepts/s, p50/p99 and CPU per
 * accept. With COMPARE_FLOOR=1, the bare Node proxy (bench/support/bare-proxy.ts, the sync rows' floor)
 * runs in the same sync rounds as one more variant, with its CPU per call, and in the SSE calls (it
 * writes an event stream on as it comes). Each SSE variant's CPU per streamed call is its process's CPU
 * over all its SSE calls, warm-up included (the others are idle meanwhile), with its write syscalls per call. Settings: COMPARE_ROUNDS (4),
 * COMPARE_ASYNC_ROUNDS (0), COMPARE_SECONDS (8), COMPARE_WARMUP_SECONDS (2), COMPARE_SSE_CALLS (60; 0
 * skips SSE), COMPARE_SSE_WARMUP (10), COMPARE_FLOOR (0), COMPARE_FUNCTION (echo; `first` for
 * streamed calls under load), COMPARE_DELAY_MS (0: each connection's pause
 * after an answer in the sync rounds, for CPU per call at about the same rate), COMPARE_CHART_OPTIONS (0:
 * 1 runs every gateway with the chart's node options and malloc settings), BENCH_CONNECTIONS (32),
 * COMPARE_DATA_PLANE_BINS (none: `<name>=<path>,...` runs those variants in native mode with that
 * apphost-dataplane binary, e.g. one built from the same commit; their CPU is Node's and the data plane's
 * added up, /proc of the process tree). Run it under the bench lock on a shared machine.
 */
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { generateSigningKey, issueRunToken } from '../src/shared/run-tokens.ts';
import { freePort } from '../test/harness/process.ts';
import { compileCommitGateways } from './support/commit-tree.ts';
import { type LoadResult, pickLoadGenerator } from './support/load.ts';
import {
  APP,
  benchApp,
  chartGatewayMallocEnv,
  chartGatewayNodeOptions,
  createParts,
  PLATFORM_KEY,
  PROJECT,
  procCpuSeconds,
  procStatusBytes,
  REPO_ROOT,
  STOP_GRACE_MS,
  startNodeChild,
  tempDir,
  treeCpuSeconds,
  writeSyscalls,
} from './support/parts.ts';
import { envNumber } from './support/report.ts';
import { ECHO_BODY } from './sync-overhead.ts';

const ROUNDS = envNumber('COMPARE_ROUNDS', 4);
const ASYNC_ROUNDS = envNumber('COMPARE_ASYNC_ROUNDS', 0);
const SECONDS = envNumber('COMPARE_SECONDS', 8);
const WARMUP = envNumber('COMPARE_WARMUP_SECONDS', 2);
const SSE_CALLS = envNumber('COMPARE_SSE_CALLS', 60);
const CONNECTIONS = envNumber('BENCH_CONNECTIONS', 32);
const FLOOR = envNumber('COMPARE_FLOOR', 0) > 0;
/**
 * With 1, every gateway runs with the chart's NODE_OPTIONS and malloc settings (as `make bench` and a
 * pod run it: `--max-semi-space-size=8`, the pod's heap size), before the variant's own flags. Without
 * them V8 sizes each process's young generation from its own history (16–128 MiB seen in one run), and
 * gateways of the same commit then differed by up to 15% in CPU per call for a whole run.
 */
const CHART_OPTIONS = envNumber('COMPARE_CHART_OPTIONS', 0) > 0;
/** Sync rounds paced: each connection pauses this long after an answer (0: full speed). See LoadSpec.delayMs. */
const DELAY_MS = envNumber('COMPARE_DELAY_MS', 0);
/** The function the sync rounds call: `first` makes them concurrent event streams (two events each). */
const FUNCTION = process.env.COMPARE_FUNCTION ?? 'echo';
/** Unmeasured SSE calls per variant first (with COMPARE_ROUNDS=0, also the gateways' only JIT warm-up). */
const SSE_WARMUP = envNumber('COMPARE_SSE_WARMUP', 10);
/** Variants run in native mode, by name: the apphost-dataplane binary each runs. */
const DATA_PLANE_BINS = new Map(
  (process.env.COMPARE_DATA_PLANE_BINS ?? '')
    .split(',')
    .filter(Boolean)
    .map((kv) => kv.split('=') as [string, string]),
);

const specs = process.argv.slice(2).map((arg) => {
  const m = /^([\w.-]+)=([^:]+)(?::(.*))?$/.exec(arg);
  if (!m?.[1] || !m[2]) throw new Error(`"${arg}" is not <name>=<commit>[:<node flags>]`);
  return { name: m[1], commit: m[2], flags: (m[3] ?? '').split(' ').filter(Boolean) };
});
if (specs.length < 2) {
  process.stderr.write('usage: node bench/compare.ts <name>=<commit>[:<node flags>] <name>=<commit> ...\n');
  process.exit(2);
}

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ');
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const mib = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MiB`;

// Each commit's gateway from its own tree (this node_modules), compiled as the image's dist/ is, as `make bench` runs it.
const entries = await compileCommitGateways(
  specs.map((s) => s.commit),
  'apphost-compare-',
);

const parts = createParts({ gatewayLogLevel: 'warn', gatewayNodeArgs: [] });
const loadGen = pickLoadGenerator(REPO_ROOT, process.env.BENCH_LOAD_TOOL);
try {
  const [nats, rt] = await Promise.all([parts.nats(), parts.runtime()]);
  const keys = { keys: [await generateSigningKey()] };
  const keyFile = join(parts.logDir, 'compare-keys.json');
  writeFileSync(keyFile, JSON.stringify(keys), { mode: 0o600 });
  const token = await issueRunToken(keys, PROJECT, new Date(Date.now() + 6 * 3600_000));
  const app = benchApp(rt.url);
  const gateways = [];
  for (const s of specs) {
    const [port, opsPort] = [await freePort(), await freePort()];
    const { proc, line } = await startNodeChild(
      `gateway-${s.name}`,
      entries.get(s.commit) as string,
      {
        NATS_URL: nats.url,
        APPHOST_LOG_LEVEL: 'warn',
        APPHOST_OPS_PORT: String(opsPort),
        APPHOST_GATEWAY_PORT: String(port),
        APPHOST_GATEWAY_HOST: '127.0.0.1',
        APPHOST_PLATFORM_KEY: PLATFORM_KEY,
        APPHOST_RUN_TOKEN_KEYS_FILE: keyFile,
        APPHOST_RUN_WORKER: 'false',
        APPHOST_BENCH_APPS: JSON.stringify([app]),
        ...(DATA_PLANE_BINS.has(s.name)
          ? {
              APPHOST_GATEWAY_DATA_PLANE: 'native',
              APPHOST_GATEWAY_DATA_PLANE_BIN: DATA_PLANE_BINS.get(s.name) as string,
              APPHOST_GATEWAY_DATA_PLANE_DIR: tempDir('apphost-compare-dp-'),
            }
          : {}),
        // The flags are the variant's own, after the chart's with COMPARE_CHART_OPTIONS=1.
        NODE_OPTIONS: CHART_OPTIONS ? chartGatewayNodeOptions() : '',
        ...(CHART_OPTIONS ? chartGatewayMallocEnv() : {}),
      },
      'listening ',
      parts.logDir,
      s.flags,
    );
    const pid = Number(line.split(' ')[2]);
    gateways.push({
      ...s,
      pid,
      proc,
      url: `http://127.0.0.1:${port}/v4/${PROJECT}/${APP}`,
      opsUrl: `http://127.0.0.1:${opsPort}`,
      idle: procStatusBytes(pid, 'VmRSS'),
      rounds: [] as Array<LoadResult & { cpuMs: number }>,
      asyncRounds: [] as Array<LoadResult & { cpuMs: number }>,
    });
  }
  // The floor: not a gateway (no async, SSE or metrics), only the sync rounds and its CPU per call.
  const floor = FLOOR ? await parts.bareProxy() : undefined;
  const syncVariants: Array<{
    name: string;
    pid: number;
    url: string;
    rounds: Array<LoadResult & { cpuMs: number }>;
  }> = [...gateways];
  const floorVariant = floor
    ? {
        name: 'bare-proxy',
        pid: floor.pid,
        url: floor.url,
        rounds: [] as Array<LoadResult & { cpuMs: number }>,
      }
    : undefined;
  if (floorVariant) syncVariants.push(floorVariant);
  process.stdout.write(
    `load average ${load()} at the start; idle RSS ${gateways.map((g) => `${g.name} ${mib(g.idle)}`).join(', ')}\n`,
  );
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
  for (let r = 0; r < ROUNDS + ASYNC_ROUNDS; r++) {
    const async = r >= ROUNDS;
    const order = async ? gateways : syncVariants;
    for (const g of r % 2 ? [...order].reverse() : order) {
      const spec = {
        url: `${g.url}/${async ? 'echo?async=true' : FUNCTION}`,
        method: 'POST' as const,
        headers,
        body: ECHO_BODY,
        connections: CONNECTIONS,
        durationSeconds: SECONDS,
        ...(DELAY_MS > 0 && !async ? { delayMs: DELAY_MS } : {}),
      };
      if (WARMUP > 0) await loadGen.run({ ...spec, durationSeconds: WARMUP });
      // A native variant's CPU is its Node's and its data plane's (the process tree).
      const cpu = DATA_PLANE_BINS.has(g.name) ? treeCpuSeconds : procCpuSeconds;
      const cpu0 = cpu(g.pid);
      const x = await loadGen.run(spec);
      const cpuMs = ((cpu(g.pid) - cpu0) * 1000) / x.requests;
      if (async) (g as (typeof gateways)[number]).asyncRounds.push({ ...x, cpuMs });
      else g.rounds.push({ ...x, cpuMs });
      process.stdout.write(
        `${async ? 'async ' : ''}round ${r + 1} ${g.name}: ${x.rps.toFixed(0)} ${async ? 'accepts' : 'req'}/s, ` +
          `p50 ${x.p50Ms.toFixed(2)} ms, p99 ${x.p99Ms.toFixed(2)} ms, ` +
          `CPU per ${async ? 'accept' : 'call'} ${cpuMs.toFixed(3)} ms, ${x.non2xx + x.errors} errors; load average ${load()}\n`,
      );
    }
  }

  // SSE time to first event: sequential calls, alternating the direct runtime and every gateway.
  const agent = new Agent({ keepAliveTimeout: 30_000, connections: 2 });
  const firstEvent = async (url: string, h: Record<string, string>) => {
    const t0 = performance.now();
    const res = await request(url, {
      method: 'POST',
      headers: { ...h, accept: 'text/event-stream', 'content-type': 'application/json' },
      body: '{}',
      dispatcher: agent,
    });
    let seen = '';
    let first = Number.NaN;
    for await (const chunk of res.body) {
      seen += (chunk as Buffer).toString('utf8');
      if (Number.isNaN(first) && seen.includes('data:')) first = performance.now() - t0;
    }
    return first;
  };
  const sse = [
    { name: 'direct runtime', url: `${rt.url}/first`, h: {} as Record<string, string> },
    ...gateways.map((g) => ({
      name: g.name,
      url: `${g.url}/first`,
      h: { authorization: headers.authorization } as Record<string, string>,
      pid: g.pid,
    })),
    ...(floor ? [{ name: 'bare-proxy', url: `${floor.url}/first`, h: {}, pid: floor.pid }] : []),
  ];
  const samples = sse.map(() => [] as number[]);
  const sseCpu0 = sse.map((v) => ('pid' in v ? procCpuSeconds(v.pid) : Number.NaN));
  const sseWrites0 = sse.map((v) => ('pid' in v ? writeSyscalls(v.pid) : Number.NaN));
  try {
    for (let i = 0; SSE_CALLS > 0 && i < SSE_WARMUP + SSE_CALLS; i++) {
      // The order rotates each time round: a call measured right after another variant's can be faster
      // or slower by up to ~0.1 ms (the runtime and the client's connection are warm), so every variant
      // takes every place equally often.
      for (let j = 0; j < sse.length; j++) {
        const k = (i + j) % sse.length;
        const v = sse[k] as (typeof sse)[number];
        const ms = await firstEvent(v.url, v.h);
        if (i >= SSE_WARMUP) samples[k]?.push(ms);
      }
    }
  } finally {
    await agent.close();
  }
  const direct = median(samples[0] ?? []);
  for (const [k, v] of SSE_CALLS > 0 ? sse.entries() : []) {
    const m = median(samples[k] ?? []);
    const cpu =
      'pid' in v
        ? `, CPU per streamed call ${(((procCpuSeconds(v.pid) - (sseCpu0[k] ?? 0)) * 1000) / (SSE_WARMUP + SSE_CALLS)).toFixed(3)} ms` +
          `, write syscalls ${((writeSyscalls(v.pid) - (sseWrites0[k] ?? 0)) / (SSE_WARMUP + SSE_CALLS)).toFixed(2)}`
        : '';
    process.stdout.write(
      `SSE first event ${v.name}: median ${m.toFixed(3)} ms, added ${(m - direct).toFixed(3)} ms${cpu}\n`,
    );
  }

  for (const g of gateways) {
    let heap = '';
    try {
      const text = await (await fetch(`${g.opsUrl}/metrics`)).text();
      const pick = (re: RegExp) =>
        Number(
          text
            .split('\n')
            .find((l) => re.test(l))
            ?.split(' ')[1],
        );
      heap = `, heap total ${mib(pick(/^nodejs_heap_size_total_bytes /))} (new space ${mib(pick(/^nodejs_heap_space_size_total_bytes\{space="new"\}/))}), used ${mib(pick(/^nodejs_heap_size_used_bytes /))}`;
    } catch {
      // heap figures stay out
    }
    const cpu = g.rounds.map((x) => x.cpuMs);
    const a = g.asyncRounds;
    if (a.length)
      process.stdout.write(
        `${g.name} async: median ${median(a.map((x) => x.rps)).toFixed(0)} accepts/s, p50 ${median(a.map((x) => x.p50Ms)).toFixed(2)} ms, ` +
          `p99 ${median(a.map((x) => x.p99Ms)).toFixed(2)} ms (${Math.min(...a.map((x) => x.p99Ms)).toFixed(2)}–${Math.max(...a.map((x) => x.p99Ms)).toFixed(2)}), ` +
          `CPU per accept ${median(a.map((x) => x.cpuMs)).toFixed(3)} ms\n`,
      );
    if (cpu.length)
      process.stdout.write(
        `${g.name} (${g.commit}${g.flags.length ? ` ${g.flags.join(' ')}` : ''}): CPU per call median ${median(cpu).toFixed(3)} ms ` +
          `(${Math.min(...cpu).toFixed(3)}–${Math.max(...cpu).toFixed(3)}), median ${median(g.rounds.map((x) => x.rps)).toFixed(0)} req/s, ` +
          `p50 ${median(g.rounds.map((x) => x.p50Ms)).toFixed(2)} ms; peak RSS ${mib(procStatusBytes(g.pid, 'VmHWM'))} (idle ${mib(g.idle)})${heap}\n`,
      );
    await g.proc.stop(STOP_GRACE_MS);
  }
  if (floorVariant?.rounds.length) {
    const cpu = floorVariant.rounds.map((x) => x.cpuMs);
    process.stdout.write(
      `bare-proxy (the floor): CPU per call median ${median(cpu).toFixed(3)} ms (${Math.min(...cpu).toFixed(3)}–${Math.max(...cpu).toFixed(3)}), ` +
        `median ${median(floorVariant.rounds.map((x) => x.rps)).toFixed(0)} req/s, p50 ${median(floorVariant.rounds.map((x) => x.p50Ms)).toFixed(2)} ms\n`,
    );
  }
  process.stdout.write(`load average ${load()} at the end\n`);
} finally {
  await parts.stop();
}
