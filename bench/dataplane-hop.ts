/**
 * `node bench/dataplane-hop.ts`: the price of the native data plane's hand-off hop (design §8, step 4:
 * "the hop's price, expected +0.02–0.03 ms/call"). One bare node:http echo server
 * (bench/support/hop-server.ts) listens on TCP and on a Unix socket; the load generator calls it
 * - `node-tcp`: directly on TCP, as the gateway's port is served in node mode;
 * - `dataplane`: through `apphost-dataplane` (step 4: every call handed off), which this script starts
 *   and drives over its fd 3 as Node's supervisor will (config, snapshot, ready), with the server's
 *   socket as its `handoffSocket`.
 * Interleaved rounds (order reversed every other round), wrk at BENCH_CONNECTIONS (32). Per round and
 * variant: req/s, p50/p99, CPU per call of the Node server and of the data plane (/proc), their sum.
 * The hop's price is the median sum of `dataplane` minus that of `node-tcp`. It leaves out what Node's
 * real hand-off server adds (parsing the marker, the gateway's own work): that is the gateway's.
 * Settings: HOP_ROUNDS (3), HOP_SECONDS (5), HOP_WARMUP_SECONDS (2), HOP_THREADS (the data plane's
 * APPHOST_GATEWAY_DATA_PLANE_THREADS, 1), HOP_BIN (build/bin/apphost-dataplane: `make build-native`).
 * Run it under the bench lock. docs/benchmarks.md, "Step 4: the hand-off hop, Rust side".
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import {
  encodeMessage,
  FrameDecoder,
  type Message,
  parsePayload,
} from '../src/gateway/dataplane/protocol.ts';
import { freePort } from '../test/harness/process.ts';
import { pickLoadGenerator } from './support/load.ts';
import {
  BENCH_DIR,
  chartGatewayMallocEnv,
  chartGatewayNodeOptions,
  procCpuSeconds,
  REPO_ROOT,
  STOP_GRACE_MS,
  startNodeChild,
  tempDir,
} from './support/parts.ts';
import { envNumber } from './support/report.ts';
import { ECHO_BODY } from './sync-overhead.ts';

const ROUNDS = envNumber('HOP_ROUNDS', 3);
const SECONDS = envNumber('HOP_SECONDS', 5);
const WARMUP = envNumber('HOP_WARMUP_SECONDS', 2);
const THREADS = envNumber('HOP_THREADS', 1);
const CONNECTIONS = envNumber('BENCH_CONNECTIONS', 32);
const BIN = process.env.HOP_BIN ?? join(REPO_ROOT, 'build', 'bin', 'apphost-dataplane');
/** Bound on the data plane's hello and ready. */
const READY_TIMEOUT_MS = 10_000;

if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run \`make build-native\` (or set HOP_BIN)`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const load = () => loadavg()[0]?.toFixed(2) ?? '?';
const logDir = tempDir('apphost-hop-');
const socket = join(logDir, 'handoff.sock');

const server = await startNodeChild(
  'hop-server',
  join(BENCH_DIR, 'support', 'hop-server.ts'),
  { HOP_SOCKET: socket, HOP_PORT: '0', NODE_OPTIONS: chartGatewayNodeOptions(), ...chartGatewayMallocEnv() },
  'listening ',
  logDir,
);
const [, tcpPort, serverPid] = server.line.trim().split(' ').map(Number);

// The data plane, as supervise.ts will start it: the control channel on fd 3.
const dpPort = await freePort();
const dp = spawn(BIN, [], {
  stdio: ['ignore', 'inherit', 'inherit', 'pipe'],
  env: { ...process.env, APPHOST_GATEWAY_DATA_PLANE_THREADS: String(THREADS) },
});
const channel = dp.stdio[3] as Duplex;
const decoder = new FrameDecoder();
const inbox: Message[] = [];
let wake: (() => void) | undefined;
channel.on('data', (chunk: Buffer) => {
  decoder.push(chunk);
  for (let p = decoder.next(); p; p = decoder.next()) inbox.push(parsePayload(p, 'node'));
  wake?.();
});
const expect = async (type: Message['type']): Promise<Message> => {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (inbox.length === 0) {
    if (Date.now() > deadline)
      throw new Error(`no ${type} from the data plane within ${READY_TIMEOUT_MS} ms`);
    await new Promise<void>((r) => {
      wake = r;
      setTimeout(r, 100);
    });
  }
  const m = inbox.shift() as Message;
  if (m.type !== type) throw new Error(`expected ${type}, got ${JSON.stringify(m)}`);
  return m;
};
const send = (m: Message) => channel.write(encodeMessage(m));

try {
  await expect('hello');
  send({
    type: 'config',
    listen: { host: '127.0.0.1', port: dpPort },
    handoffSocket: socket,
    gateway: {
      maxBodyBytes: 10 * 2 ** 20,
      syncTimeoutMs: 300_000,
      streamIdleTimeoutMs: 300_000,
      retryAfterSeconds: 5,
      drainTimeoutMs: 30_000,
      connectionHandoverMs: 3_000,
      coldStartTimeoutMs: 60_000,
      handoffMarginMs: 5_000,
      syncRecordsPerAppPerSecond: 10,
      syncRecordsPerSecond: 200,
    },
    balancer: {
      queueTimeoutMs: 30_000,
      queueDepthFactor: 10,
      maxQueuePerApp: 1000,
      capacityBlockMs: 100,
      unreachableBlockMs: 2000,
      maxRetries: 3,
      retryAfterSeconds: 5,
      routing: 'endpoints',
    },
    tokenCacheMaxEntries: 10_000,
    loadReportIntervalMs: 1000,
    logLevel: 'warn',
  } as Message);
  send({
    type: 'snapshot',
    gen: 'bench',
    seq: 0,
    apps: [],
    replicas: [],
    failures: [],
    domains: [],
    tokens: [],
  } as Message);
  await expect('ready');

  const loadGen = pickLoadGenerator(REPO_ROOT, process.env.BENCH_LOAD_TOOL);
  const variants = [
    { name: 'node-tcp', url: `http://127.0.0.1:${tcpPort}/echo`, rows: [] as Row[] },
    { name: 'dataplane', url: `http://127.0.0.1:${dpPort}/echo`, rows: [] as Row[] },
  ];
  interface Row {
    rps: number;
    p50: number;
    p99: number;
    nodeMs: number;
    dpMs: number;
    load: string;
  }
  process.stdout.write(
    `load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' / ')} at the start\n`,
  );
  for (let r = 0; r < ROUNDS; r++) {
    for (const v of r % 2 ? [...variants].reverse() : variants) {
      const spec = {
        url: v.url,
        method: 'POST' as const,
        headers: { 'content-type': 'application/json' },
        body: ECHO_BODY,
        connections: CONNECTIONS,
        durationSeconds: SECONDS,
      };
      if (WARMUP > 0) await loadGen.run({ ...spec, durationSeconds: WARMUP });
      const [n0, d0] = [procCpuSeconds(serverPid as number), procCpuSeconds(dp.pid as number)];
      const x = await loadGen.run(spec);
      const row = {
        rps: x.rps,
        p50: x.p50Ms,
        p99: x.p99Ms,
        nodeMs: ((procCpuSeconds(serverPid as number) - n0) * 1000) / x.requests,
        dpMs: ((procCpuSeconds(dp.pid as number) - d0) * 1000) / x.requests,
        load: load(),
      };
      v.rows.push(row);
      if (x.non2xx + x.errors > 0) process.stdout.write(`  ${v.name}: ${x.non2xx + x.errors} errors\n`);
      process.stdout.write(
        `round ${r + 1} ${v.name}: ${row.rps.toFixed(0)} req/s, p50 ${row.p50.toFixed(2)} p99 ${row.p99.toFixed(2)} ms, ` +
          `CPU/call Node ${row.nodeMs.toFixed(4)} + data plane ${row.dpMs.toFixed(4)} = ${(row.nodeMs + row.dpMs).toFixed(4)} ms; load ${row.load}\n`,
      );
    }
  }
  process.stdout.write(
    '| variant | req/s | p50 ms | p99 ms | Node CPU/call ms | data plane CPU/call ms | sum ms (range) | load |\n' +
      '|---|---:|---:|---:|---:|---:|---|---|\n',
  );
  const sums = (v: (typeof variants)[number]) => v.rows.map((x) => x.nodeMs + x.dpMs);
  for (const v of variants) {
    const m = (f: (x: Row) => number, d: number) => median(v.rows.map(f)).toFixed(d);
    process.stdout.write(
      `| ${v.name} | ${m((x) => x.rps, 0)} | ${m((x) => x.p50, 2)} | ${m((x) => x.p99, 2)} | ${m((x) => x.nodeMs, 4)} | ` +
        `${m((x) => x.dpMs, 4)} | ${median(sums(v)).toFixed(4)} (${Math.min(...sums(v)).toFixed(4)}–${Math.max(...sums(v)).toFixed(4)}) | ` +
        `${v.rows.map((x) => x.load).join(', ')} |\n`,
    );
  }
  const [tcp, hop] = variants as [(typeof variants)[number], (typeof variants)[number]];
  process.stdout.write(
    `hop price (median sums): +${(median(sums(hop)) - median(sums(tcp))).toFixed(4)} ms CPU/call; ` +
      `load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' / ')} at the end\n`,
  );
} finally {
  // The channel's end: the data plane drains (nothing in flight) and exits 0.
  channel.end();
  const exited = new Promise((r) => (dp.exitCode === null ? dp.once('exit', r) : r(undefined)));
  const kill = setTimeout(() => dp.kill('SIGKILL'), STOP_GRACE_MS);
  await exited;
  clearTimeout(kill);
  await server.proc.stop(STOP_GRACE_MS);
}
