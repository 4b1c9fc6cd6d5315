/**
 * `node bench/floor.ts <name>=<features>[:<node flags>] ...`: variants of the bare Node proxy (the sync
 * rows' floor) against one runtime, with nginx `proxy_pass` and the direct runtime in the same
 * interleaved rounds (order reversed every other round), wrk at BENCH_CONNECTIONS (32). `<features>` is
 * FLOOR_FEATURES of bench/support/floor-proxy.ts (`-` for none); the name `bare` runs
 * bench/support/bare-proxy.ts itself. Every proxy gets the chart's node options and malloc env first.
 * Prints per round and variant: req/s, its ratio to nginx's in that round, p50/p99, CPU per call and
 * write/read syscalls per call from /proc (nginx: its worker's), the load average; then medians.
 * Nothing is written to RESULTS.md. Settings: FLOOR_ROUNDS (2), FLOOR_SECONDS (5), FLOOR_WARMUP_SECONDS (2).
 * Run it under the bench lock. docs/benchmarks.md, "The Node HTTP floor (ninth round)".
 */
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../test/harness/process.ts';
import { pickLoadGenerator } from './support/load.ts';
import { findNginx, startNginx } from './support/nginx.ts';
import {
  BENCH_DIR,
  chartGatewayMallocEnv,
  chartGatewayNodeOptions,
  createParts,
  procCpuSeconds,
  processTree,
  REPO_ROOT,
  STOP_GRACE_MS,
  startNodeChild,
} from './support/parts.ts';
import { envNumber } from './support/report.ts';
import { ECHO_BODY } from './sync-overhead.ts';

const ROUNDS = envNumber('FLOOR_ROUNDS', 2);
const SECONDS = envNumber('FLOOR_SECONDS', 5);
const WARMUP = envNumber('FLOOR_WARMUP_SECONDS', 2);
const CONNECTIONS = envNumber('BENCH_CONNECTIONS', 32);

const specs = process.argv.slice(2).map((arg) => {
  const m = /^([\w.-]+)=([^:]*)(?::(.*))?$/.exec(arg);
  if (!m?.[1]) throw new Error(`"${arg}" is not <name>=<features>[:<node flags>]`);
  return { name: m[1], features: m[2] === '-' ? '' : (m[2] ?? ''), flags: m[3] ?? '' };
});

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

const parts = createParts({ gatewayLogLevel: 'warn', gatewayNodeArgs: [] });
const loadGen = pickLoadGenerator(REPO_ROOT, process.env.BENCH_LOAD_TOOL);
const nginxPath = findNginx();
const stops: Array<() => Promise<void>> = [];
try {
  const rt = await parts.runtime();
  const variants: Array<{ name: string; url: string; pid: number; rows: Row[] }> = [
    {
      name: 'direct',
      url: rt.url,
      // The runtime's python process (the managed child is its watchdog shell).
      pid:
        processTree(rt.proc.child.pid as number).find((p) => {
          try {
            return readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0')[0]?.endsWith('python');
          } catch {
            return false;
          }
        }) ?? Number.NaN,
      rows: [],
    },
  ];
  if (nginxPath) {
    const dir = join(parts.logDir, 'nginx');
    const n = await startNginx(nginxPath, rt.port, dir);
    stops.push(n.stop);
    const master = Number(readFileSync(join(dir, 'nginx.pid'), 'utf8').trim());
    variants.push({ name: 'nginx', url: n.url, pid: processTree(master)[1] ?? master, rows: [] });
  }
  for (const s of specs) {
    const port = await freePort();
    const script = join(BENCH_DIR, 'support', s.name === 'bare' ? 'bare-proxy.ts' : 'floor-proxy.ts');
    const { proc, line } = await startNodeChild(
      `floor-${s.name}`,
      script,
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
    variants.push({
      name: s.name,
      url: `http://127.0.0.1:${port}`,
      pid: Number(line.split(' ')[2]),
      rows: [],
    });
  }
  interface Row {
    rps: number;
    ratio: number;
    p50: number;
    p99: number;
    cpuMs: number;
    sysMs: number;
    writes: number;
    reads: number;
    load: string;
  }
  process.stdout.write(
    `load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' / ')} at the start\n`,
  );
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 ? [...variants].reverse() : variants;
    const round: Array<[(typeof variants)[number], Omit<Row, 'ratio'>]> = [];
    for (const v of order) {
      const spec = {
        url: `${v.url}/echo`,
        method: 'POST' as const,
        headers: { 'content-type': 'application/json' },
        body: ECHO_BODY,
        connections: CONNECTIONS,
        durationSeconds: SECONDS,
      };
      if (WARMUP > 0) await loadGen.run({ ...spec, durationSeconds: WARMUP });
      const [c0, s0, w0, r0] = [
        procCpuSeconds(v.pid),
        sysSeconds(v.pid),
        io(v.pid, 'syscw'),
        io(v.pid, 'syscr'),
      ];
      const x = await loadGen.run(spec);
      const n = x.requests;
      round.push([
        v,
        {
          rps: x.rps,
          p50: x.p50Ms,
          p99: x.p99Ms,
          cpuMs: ((procCpuSeconds(v.pid) - c0) * 1000) / n,
          sysMs: ((sysSeconds(v.pid) - s0) * 1000) / n,
          writes: (io(v.pid, 'syscw') - w0) / n,
          reads: (io(v.pid, 'syscr') - r0) / n,
          load: load(),
        },
      ]);
      if (x.non2xx + x.errors > 0) process.stdout.write(`  ${v.name}: ${x.non2xx + x.errors} errors\n`);
    }
    const nginxRps = round.find(([v]) => v.name === 'nginx')?.[1].rps ?? Number.NaN;
    for (const [v, row] of round) {
      const full = { ...row, ratio: row.rps / nginxRps };
      v.rows.push(full);
      process.stdout.write(
        `round ${r + 1} ${v.name}: ${row.rps.toFixed(0)} req/s (×${full.ratio.toFixed(2)} nginx), p50 ${row.p50.toFixed(2)} ` +
          `p99 ${row.p99.toFixed(2)} ms, CPU/call ${row.cpuMs.toFixed(4)} ms (kernel ${row.sysMs.toFixed(4)}), writes/call ${row.writes.toFixed(2)}, ` +
          `reads/call ${row.reads.toFixed(2)}; load ${row.load}\n`,
      );
    }
  }
  process.stdout.write(
    '| variant | req/s | ×nginx | CPU/call ms | kernel ms | writes/call | reads/call | p99 ms | load |\n',
  );
  for (const v of variants) {
    const m = (f: (x: Row) => number, d: number) => median(v.rows.map(f)).toFixed(d);
    const range = (f: (x: Row) => number, d: number) =>
      `${Math.min(...v.rows.map(f)).toFixed(d)}–${Math.max(...v.rows.map(f)).toFixed(d)}`;
    process.stdout.write(
      `| ${v.name} | ${m((x) => x.rps, 0)} | ${range((x) => x.ratio, 2)} | ${range((x) => x.cpuMs, 4)} | ${m((x) => x.sysMs, 4)} | ` +
        `${m((x) => x.writes, 2)} | ${m((x) => x.reads, 2)} | ${m((x) => x.p99, 2)} | ${v.rows.map((x) => x.load).join(', ')} |\n`,
    );
  }
  process.stdout.write(
    `load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' / ')} at the end\n`,
  );
} finally {
  for (const s of stops.reverse()) await s().catch(() => {});
  await parts.stop();
}
