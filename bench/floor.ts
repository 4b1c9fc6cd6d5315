/**
 * `node bench/floor.ts <variant> ...`: proxies against one runtime, with nginx `proxy_pass` and the
 * direct runtime in the same interleaved rounds (order reversed every other round), wrk at
 * BENCH_CONNECTIONS (32). A variant is
 * - `<name>=<features>[:<node flags>]`: a variant of the bare Node proxy, `<features>` being FLOOR_FEATURES
 *   of bench/support/floor-proxy.ts (`-` for none); the name `bare` (alone or with `=`) runs
 *   bench/support/bare-proxy.ts itself. Every Node proxy gets the chart's node options and malloc env first;
 * - a native proxy of bench/native/ by name (bench/support/native.ts: `go-std`, `go-std-1`, `go-fast`,
 *   `go-fast-1`, `hyper-1`, `hyper-2`; `hyper-1-work`, `hyper-1-worklog` and `hyper-2-work` also do the
 *   gateway's own per-call work on its path), built into the build cache on first use (needs go / cargo);
 * - `gateway`: the benchmark gateway itself (bench/support/parts.ts, log level warn) on its path with a run
 *   token, beside its floor; `gateway-native`: the same gateway in native mode, build/bin/apphost-dataplane
 *   (`make build-native`) on its port, which in step 4 hands every call to Node over the hand-off socket;
 *   `gateway-native<suffix>+<binary>` (e.g. `gateway-native-s+/tmp/dp-s`): the same with another data plane
 *   binary (a build profile against the default's, in the same rounds).
 *   Its CPU, syscalls and RSS are Node's and the data plane's added up.
 * Prints per round and variant: req/s, its ratio to nginx's and to direct's in that round, p50/p99, CPU per
 * call (user and kernel) and write/read syscalls per call from /proc (nginx: its worker's), the load
 * average; then medians, with each process's RSS once started (before any load) and its peak (VmHWM).
 * Then, unless 0: SSE time to first event (FLOOR_SSE_CALLS sequential `POST /first` per variant after
 * FLOOR_SSE_WARMUP, rotating the order as bench/streaming.ts does), and a syscall census (FLOOR_CENSUS_SECONDS
 * of the same load with `perf stat` counting each process's syscalls by kind: /proc/<pid>/io misses
 * recv/send, which nginx, tokio and Go use; skipped when perf is missing). Nothing is written to
 * RESULTS.md. Settings: FLOOR_ROUNDS (2), FLOOR_SECONDS (5), FLOOR_WARMUP_SECONDS (2), FLOOR_SSE_CALLS
 * (300), FLOOR_SSE_WARMUP (300), FLOOR_CENSUS_SECONDS (3). Run it under the bench lock.
 * docs/benchmarks.md, "The Node HTTP floor (ninth round)" and "A native data plane (tenth round)".
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { freePort } from '../test/harness/process.ts';
import { timeToFirstEvent } from './streaming.ts';
import { pickLoadGenerator } from './support/load.ts';
import { NATIVE_PROXIES, nativeProxyBinary } from './support/native.ts';
import { findNginx, startNginx } from './support/nginx.ts';
import {
  APP,
  BENCH_DIR,
  chartGatewayMallocEnv,
  chartGatewayNodeOptions,
  compileGatewayEntry,
  createParts,
  PROJECT,
  procCpuSeconds,
  processTree,
  procStatusBytes,
  REPO_ROOT,
  STOP_GRACE_MS,
  startChild,
  startNodeChild,
} from './support/parts.ts';
import { envNumber } from './support/report.ts';
import { percentile } from './support/stats.ts';
import { ECHO_BODY } from './sync-overhead.ts';

const ROUNDS = envNumber('FLOOR_ROUNDS', 2);
const SECONDS = envNumber('FLOOR_SECONDS', 5);
const WARMUP = envNumber('FLOOR_WARMUP_SECONDS', 2);
const CONNECTIONS = envNumber('BENCH_CONNECTIONS', 32);
const SSE_CALLS = envNumber('FLOOR_SSE_CALLS', 300);
const SSE_WARMUP = envNumber('FLOOR_SSE_WARMUP', 300);
const CENSUS_SECONDS = envNumber('FLOOR_CENSUS_SECONDS', 3);
const PERF = ['/usr/bin/perf', '/usr/local/bin/perf'].find((p) => existsSync(p));
/** Bound on `perf stat` writing its counts after SIGINT. */
const PERF_STOP_TIMEOUT_MS = 10_000;
/** Time `perf stat` gets to attach to every thread before the load starts. */
const PERF_ATTACH_MS = 500;

const specs = process.argv.slice(2).map((arg) => {
  if (arg in NATIVE_PROXIES) return { name: arg, features: '', flags: '', native: NATIVE_PROXIES[arg] };
  if (arg === 'bare' || arg === 'gateway' || arg === 'gateway-native')
    return { name: arg, features: '', flags: '', native: undefined };
  const other = /^(gateway-native[\w.-]*)\+(.+)$/.exec(arg);
  if (other?.[1] && other[2])
    return { name: other[1], features: '', flags: '', native: undefined, dataPlane: other[2] };
  const m = /^([\w.-]+)=([^:]*)(?::(.*))?$/.exec(arg);
  if (!m?.[1])
    throw new Error(
      `"${arg}" is not <name>=<features>[:<node flags>], bare, gateway, gateway-native[<suffix>+<binary>], or one of ${Object.keys(NATIVE_PROXIES).join(', ')}`,
    );
  return { name: m[1], features: m[2] === '-' ? '' : (m[2] ?? ''), flags: m[3] ?? '', native: undefined };
});
// Build the native proxies before anything starts (a first cargo build takes a minute).
const binaries = new Map<string, string>();
for (const s of specs) if (s.native) binaries.set(s.name, await nativeProxyBinary(s.native));

/** A variant's processes: its own, and with `tree` its children (gateway-native's data plane). */
const pidsOf = (v: { pid: number; tree?: boolean }) => (v.tree ? processTree(v.pid) : [v.pid]);
const sum = (pids: number[], f: (pid: number) => number) => pids.reduce((t, p) => t + f(p), 0);

const load = () =>
  loadavg()
    .slice(0, 1)
    .map((l) => l.toFixed(2))
    .join('');
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
/** Kernel-mode CPU seconds (stime) of a process, from /proc/<pid>/stat. */
const sysSeconds = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[12]) / 100;
  } catch {
    return Number.NaN;
  }
};
const io = (pid: number, field: 'syscw' | 'syscr') => {
  try {
    return Number(new RegExp(`^${field}: (\\d+)$`, 'm').exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1]);
  } catch {
    return Number.NaN;
  }
};

/** Syscalls by kind, each a list of tracepoints `perf stat` counts (all threads of the process). */
const CENSUS: Record<string, string[]> = {
  all: ['raw_syscalls:sys_enter'],
  read: ['read', 'readv', 'recvfrom', 'recvmsg'].map((c) => `syscalls:sys_enter_${c}`),
  write: ['write', 'writev', 'sendto', 'sendmsg'].map((c) => `syscalls:sys_enter_${c}`),
  epoll: ['epoll_wait', 'epoll_pwait', 'epoll_pwait2', 'epoll_ctl'].map((c) => `syscalls:sys_enter_${c}`),
  futex: ['syscalls:sys_enter_futex'],
};

/** Counts `pid`'s syscalls by CENSUS kind while `during` runs. */
async function syscallCensus(pid: number, during: () => Promise<void>): Promise<Record<string, number>> {
  const out = join(parts.logDir, `perf-${pid}-${Date.now()}.csv`);
  const events = Object.values(CENSUS).flat();
  const perf = spawn(
    PERF as string,
    ['stat', '-x', ',', '-e', events.join(','), '-p', String(pid), '-o', out],
    {
      stdio: 'ignore',
    },
  );
  const exited = new Promise<void>((resolve) => perf.once('exit', () => resolve()));
  await new Promise((r) => setTimeout(r, PERF_ATTACH_MS));
  try {
    await during();
  } finally {
    perf.kill('SIGINT');
    const timer = setTimeout(() => perf.kill('SIGKILL'), PERF_STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  }
  const counts = new Map<string, number>();
  for (const line of readFileSync(out, 'utf8').split('\n')) {
    const [count, , event] = line.split(',');
    if (event && count !== undefined) counts.set(event, Number(count));
  }
  return Object.fromEntries(
    Object.entries(CENSUS).map(([kind, evs]) => [
      kind,
      evs.reduce((sum, e) => sum + (counts.get(e) ?? 0), 0),
    ]),
  );
}

const parts = createParts({ gatewayLogLevel: 'warn', gatewayNodeArgs: [] });
const loadGen = pickLoadGenerator(REPO_ROOT, process.env.BENCH_LOAD_TOOL);
const nginxPath = findNginx();
const stops: Array<() => Promise<void>> = [];
/** The gateway entry of `gateway-native…+<binary>` variants, compiled once. */
let otherEntry: Promise<string> | undefined;

interface Row {
  rps: number;
  ratio: number;
  ratioDirect: number;
  p50: number;
  p99: number;
  cpuMs: number;
  sysMs: number;
  writes: number;
  reads: number;
  load: string;
}
interface Variant {
  name: string;
  /** The base the calls' paths (`/echo`, `/first`) are appended to. */
  url: string;
  headers: Record<string, string>;
  pid: number;
  /** Count the children's CPU, syscalls and memory too (gateway-native). */
  tree?: boolean;
  /** VmRSS once started, before any load. */
  idleRss: number;
  rows: Row[];
  sse: number[];
  census?: Record<string, number>;
}
const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

try {
  const rt = await parts.runtime();
  // The runtime's python process (the managed child is its watchdog shell).
  const pythonPid =
    processTree(rt.proc.child.pid as number).find((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0')[0]?.endsWith('python');
      } catch {
        return false;
      }
    }) ?? Number.NaN;
  const variants: Variant[] = [];
  const add = (name: string, url: string, pid: number, headers: Record<string, string> = {}, tree = false) =>
    variants.push({
      name,
      url,
      headers,
      pid,
      tree,
      idleRss: sum(tree ? processTree(pid) : [pid], (p) => procStatusBytes(p, 'VmRSS')),
      rows: [],
      sse: [],
    });
  // The gateway's path and a run token, for the variants that serve it.
  const token = specs.some((s) => s.name.startsWith('gateway') || s.native?.gatewayShaped)
    ? await parts.token()
    : '';
  const gatewayPath = `/v4/${PROJECT}/${APP}`;
  const auth = { authorization: `Bearer ${token}` };
  add('direct', rt.url, pythonPid);
  if (nginxPath) {
    const dir = join(parts.logDir, 'nginx');
    const n = await startNginx(nginxPath, rt.port, dir);
    stops.push(n.stop);
    const master = Number(readFileSync(join(dir, 'nginx.pid'), 'utf8').trim());
    add('nginx', n.url, processTree(master)[1] ?? master);
  }
  for (const s of specs) {
    if (s.name === 'gateway') {
      const g = await parts.gateway();
      add(s.name, `${g.url}${gatewayPath}`, g.pid, auth);
      continue;
    }
    if (s.name === 'gateway-native') {
      const g = await parts.gatewayNative();
      add(s.name, `${g.url}${gatewayPath}`, g.pid, auth, true);
      continue;
    }
    if ('dataPlane' in s && s.dataPlane) {
      otherEntry ??= compileGatewayEntry();
      const g = await parts.startNativeGateway(s.name, await otherEntry, s.dataPlane, []);
      stops.push(() => g.proc.stop(STOP_GRACE_MS));
      add(s.name, `${g.url}${gatewayPath}`, g.pid, auth, true);
      continue;
    }
    const port = await freePort();
    const work = s.native?.gatewayShaped
      ? {
          NATIVE_WORK_TOKEN: token,
          NATIVE_WORK_PROJECT: PROJECT,
          NATIVE_WORK_APP: APP,
          NATIVE_WORK_FUNCTIONS: 'echo,first',
        }
      : {};
    const { proc, line } = s.native
      ? await startChild(
          `floor-${s.name}`,
          binaries.get(s.name) as string,
          [],
          { NATIVE_UPSTREAM: rt.url, NATIVE_PORT: String(port), ...s.native.env, ...work },
          'listening ',
          parts.logDir,
        )
      : await startNodeChild(
          `floor-${s.name}`,
          join(BENCH_DIR, 'support', s.name === 'bare' ? 'bare-proxy.ts' : 'floor-proxy.ts'),
          {
            BARE_PROXY_UPSTREAM: rt.url,
            BARE_PROXY_PORT: String(port),
            FLOOR_UPSTREAM: rt.url,
            FLOOR_PORT: String(port),
            FLOOR_FEATURES: s.features,
            NODE_OPTIONS: chartGatewayNodeOptions(),
            ...chartGatewayMallocEnv(),
          },
          'listening ',
          parts.logDir,
          // On the command line, after NODE_OPTIONS (some V8 flags are not allowed in NODE_OPTIONS).
          s.flags.split(' ').filter(Boolean),
        );
    stops.push(() => proc.stop(STOP_GRACE_MS));
    const base = `http://127.0.0.1:${port}`;
    if (s.native?.gatewayShaped) add(s.name, `${base}${gatewayPath}`, Number(line.split(' ')[2]), auth);
    else add(s.name, base, Number(line.split(' ')[2]));
  }
  const loadAverage = () =>
    loadavg()
      .map((l) => l.toFixed(2))
      .join(' / ');
  process.stdout.write(`load average ${loadAverage()} at the start\n`);
  const echoSpec = (v: Variant, durationSeconds: number) => ({
    url: `${v.url}/echo`,
    method: 'POST' as const,
    headers: { 'content-type': 'application/json', ...v.headers },
    body: ECHO_BODY,
    connections: CONNECTIONS,
    durationSeconds,
  });
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 ? [...variants].reverse() : variants;
    const round: Array<[Variant, Omit<Row, 'ratio' | 'ratioDirect'>]> = [];
    for (const v of order) {
      const spec = echoSpec(v, SECONDS);
      if (WARMUP > 0) await loadGen.run({ ...spec, durationSeconds: WARMUP });
      const pids = pidsOf(v);
      const [c0, s0, w0, r0] = [
        sum(pids, procCpuSeconds),
        sum(pids, sysSeconds),
        sum(pids, (p) => io(p, 'syscw')),
        sum(pids, (p) => io(p, 'syscr')),
      ];
      const x = await loadGen.run(spec);
      const n = x.requests;
      round.push([
        v,
        {
          rps: x.rps,
          p50: x.p50Ms,
          p99: x.p99Ms,
          cpuMs: ((sum(pids, procCpuSeconds) - c0) * 1000) / n,
          sysMs: ((sum(pids, sysSeconds) - s0) * 1000) / n,
          writes: (sum(pids, (p) => io(p, 'syscw')) - w0) / n,
          reads: (sum(pids, (p) => io(p, 'syscr')) - r0) / n,
          load: load(),
        },
      ]);
      if (x.non2xx + x.errors > 0) process.stdout.write(`  ${v.name}: ${x.non2xx + x.errors} errors\n`);
    }
    const rpsOf = (name: string) => round.find(([v]) => v.name === name)?.[1].rps ?? Number.NaN;
    for (const [v, row] of round) {
      const full = { ...row, ratio: row.rps / rpsOf('nginx'), ratioDirect: row.rps / rpsOf('direct') };
      v.rows.push(full);
      process.stdout.write(
        `round ${r + 1} ${v.name}: ${row.rps.toFixed(0)} req/s (×${full.ratio.toFixed(2)} nginx, ×${full.ratioDirect.toFixed(2)} direct), ` +
          `p50 ${row.p50.toFixed(2)} p99 ${row.p99.toFixed(2)} ms, CPU/call ${row.cpuMs.toFixed(4)} ms (kernel ${row.sysMs.toFixed(4)}), ` +
          `writes/call ${row.writes.toFixed(2)}, reads/call ${row.reads.toFixed(2)}; load ${row.load}\n`,
      );
    }
  }

  if (SSE_CALLS > 0) {
    const agent = new Agent({ keepAliveTimeout: 30_000, connections: 2 });
    try {
      for (let i = 0; i < SSE_WARMUP + SSE_CALLS; i++) {
        for (let j = 0; j < variants.length; j++) {
          const v = variants[(i + j) % variants.length] as Variant;
          const ms = await timeToFirstEvent(agent, `${v.url}/first`, v.headers);
          if (i >= SSE_WARMUP) v.sse.push(ms);
        }
      }
    } finally {
      await agent.close();
    }
    process.stdout.write(`SSE: ${SSE_CALLS} calls per variant after ${SSE_WARMUP}; load ${load()}\n`);
  }

  if (CENSUS_SECONDS > 0 && PERF) {
    for (const v of variants) {
      let n = 0;
      const counts = await syscallCensus(v.pid, async () => {
        n = (await loadGen.run(echoSpec(v, CENSUS_SECONDS))).requests;
      });
      v.census = Object.fromEntries(Object.entries(counts).map(([k, c]) => [k, c / n]));
    }
    process.stdout.write(`syscall census: ${CENSUS_SECONDS} s per variant under perf stat; load ${load()}\n`);
  } else if (CENSUS_SECONDS > 0) process.stdout.write('syscall census skipped: no perf\n');

  const sseMedian = (name: string) => median(variants.find((v) => v.name === name)?.sse ?? []);
  process.stdout.write(
    '| variant | req/s | ×nginx | ×direct | p50 ms | p99 ms | CPU/call ms | user ms | kernel ms | syscalls/call (read, write, epoll, futex) | RSS idle → peak MiB | SSE first event p50 / p99 ms (+ vs direct) | load |\n' +
      '|---|---:|---|---|---:|---:|---|---:|---:|---|---|---|---|\n',
  );
  for (const v of variants) {
    const m = (f: (x: Row) => number, d: number) => median(v.rows.map(f)).toFixed(d);
    const range = (f: (x: Row) => number, d: number) =>
      `${Math.min(...v.rows.map(f)).toFixed(d)}–${Math.max(...v.rows.map(f)).toFixed(d)}`;
    const c = v.census;
    const census = c
      ? `${(c.all ?? 0).toFixed(2)} (${(c.read ?? 0).toFixed(2)}, ${(c.write ?? 0).toFixed(2)}, ${(c.epoll ?? 0).toFixed(2)}, ${(c.futex ?? 0).toFixed(2)})`
      : `— (proc: ${m((x) => x.reads, 2)} r, ${m((x) => x.writes, 2)} w)`;
    const sse = v.sse.length
      ? `${median(v.sse).toFixed(3)} / ${percentile(v.sse, 99).toFixed(3)} (+${(median(v.sse) - sseMedian('direct')).toFixed(3)})`
      : '—';
    process.stdout.write(
      `| ${v.name} | ${m((x) => x.rps, 0)} | ${range((x) => x.ratio, 2)} | ${range((x) => x.ratioDirect, 2)} | ` +
        `${m((x) => x.p50, 2)} | ${m((x) => x.p99, 2)} | ${range((x) => x.cpuMs, 4)} | ${m((x) => x.cpuMs - x.sysMs, 4)} | ` +
        `${m((x) => x.sysMs, 4)} | ${census} | ${mib(v.idleRss)} → ${mib(sum(pidsOf(v), (p) => procStatusBytes(p, 'VmHWM')))} | ${sse} | ` +
        `${v.rows.map((x) => x.load).join(', ')} |\n`,
    );
  }
  process.stdout.write(`load average ${loadAverage()} at the end\n`);
} finally {
  for (const s of stops.reverse()) await s().catch(() => {});
  await parts.stop();
}
