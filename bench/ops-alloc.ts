/**
 * `node bench/ops-alloc.ts <name>=<commit>[+<data plane binary>] ...`: what one request to the ops port
 * (/metrics, /readyz, /healthz) costs the benchmark gateway's Node process in native mode (OPS_ALLOC_MODE=node:
 * node mode), as bench/pod-idle.ts starts it (each commit's entry compiled and bundled as `make bench` does,
 * the chart's NODE_OPTIONS and malloc env). Per round and variant, against a gateway that has just printed
 * `listening` and answered OPS_ALLOC_WARMUP requests of each path:
 * - latency: OPS_ALLOC_REQUESTS sequential GETs of /metrics, OPS_ALLOC_GAP_MS apart (median and p90, client side);
 * - allocation: V8's sampling heap profiler over the inspector (HeapProfiler.startSampling, one sample per
 *   OPS_ALLOC_SAMPLE_BYTES allocated on average, objects collected by minor and major GCs kept in the profile:
 *   every byte allocated, not only what survives) around OPS_ALLOC_REQUESTS back-to-back GETs of one path;
 *   the profile's total over the requests is the bytes allocated per request, JavaScript heap only (the
 *   data plane's own side is Rust's malloc, not counted). The largest allocating functions of the /metrics
 *   profile are printed with OPS_ALLOC_TOP > 0.
 * Rounds (OPS_ALLOC_ROUNDS, 3) are interleaved, the order reversed every other round. Nothing is written to
 * RESULTS.md; run it under the bench lock. docs/benchmarks.md, "The /metrics scrape (issue 16, fourteenth round)".
 */
import { join } from 'node:path';
import { freePort } from '../test/harness/process.ts';
import { compileCommitGateways } from './support/commit-tree.ts';
import { createParts, REPO_ROOT, STOP_GRACE_MS } from './support/parts.ts';
import { envNumber, loadAverageNow } from './support/report.ts';

const ROUNDS = envNumber('OPS_ALLOC_ROUNDS', 3);
const REQUESTS = envNumber('OPS_ALLOC_REQUESTS', 100);
const WARMUP = envNumber('OPS_ALLOC_WARMUP', 20);
const GAP_MS = envNumber('OPS_ALLOC_GAP_MS', 20);
const SAMPLE_BYTES = envNumber('OPS_ALLOC_SAMPLE_BYTES', 256);
const TOP = envNumber('OPS_ALLOC_TOP', 0);
const NATIVE = (process.env.OPS_ALLOC_MODE ?? 'native') !== 'node';
const PATHS = ['/metrics', '/readyz', '/healthz'] as const;
const DEFAULT_BIN = join(REPO_ROOT, 'build', 'bin', 'apphost-dataplane');

const specs = process.argv.slice(2).map((arg) => {
  const m = /^([\w.-]+)=([^+]+)(?:\+(.+))?$/.exec(arg);
  if (!m?.[1] || !m[2]) throw new Error(`"${arg}" is not <name>=<commit>[+<data plane binary>]`);
  return { name: m[1], commit: m[2], bin: m[3] ?? DEFAULT_BIN };
});
if (specs.length < 1) {
  process.stderr.write('usage: node bench/ops-alloc.ts <name>=<commit>[+<data plane binary>] ...\n');
  process.exit(2);
}
const kib = (bytes: number) => (bytes / 1024).toFixed(1);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)] ?? Number.NaN;

const get = async (url: string): Promise<number> => {
  const res = await fetch(url);
  const body = await res.arrayBuffer();
  if (!res.ok) throw new Error(`${url}: ${res.status}`);
  return body.byteLength;
};

/** A minimal client of the inspector protocol (Node's built-in WebSocket). */
async function inspector(port: number) {
  const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{
    webSocketDebuggerUrl: string;
  }>;
  const ws = new WebSocket(list[0]?.webSocketDebuggerUrl ?? '');
  await new Promise((r) => ws.addEventListener('open', r, { once: true }));
  let id = 0;
  const pending = new Map<number, (v: unknown) => void>();
  ws.addEventListener('message', (e) => {
    const m = JSON.parse(String(e.data)) as { id?: number; result?: unknown; error?: unknown };
    if (m.id !== undefined) {
      pending.get(m.id)?.(m.result ?? m.error);
      pending.delete(m.id);
    }
  });
  return {
    send: <T>(method: string, params = {}) =>
      new Promise<T>((r) => {
        const i = ++id;
        pending.set(i, r as (v: unknown) => void);
        ws.send(JSON.stringify({ id: i, method, params }));
      }),
    close: () => ws.close(),
  };
}

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

/** The profile's total, and its functions by bytes allocated in them and below (each counted once per stack). */
function summarize(head: ProfileNode): { total: number; inclusive: Map<string, number> } {
  const inclusive = new Map<string, number>();
  const walk = (n: ProfileNode, stack: Set<string>): number => {
    const f = n.callFrame;
    const name = `${f.functionName || '(anonymous)'} ${f.url.split('/').slice(-2).join('/')}:${f.lineNumber}`;
    const inner = new Set(stack).add(name);
    const size = n.children.reduce((a, c) => a + walk(c, inner), n.selfSize);
    if (!stack.has(name)) inclusive.set(name, (inclusive.get(name) ?? 0) + size);
    return size;
  };
  return { total: walk(head, new Set()), inclusive };
}

const entries = await compileCommitGateways(
  specs.map((s) => s.commit),
  'apphost-ops-alloc-',
);

const parts = createParts({ gatewayLogLevel: 'warn', gatewayNodeArgs: [] });
try {
  await Promise.all([parts.nats(), parts.runtime()]);
  process.stdout.write(
    `${NATIVE ? 'native' : 'node'} mode; ${REQUESTS} requests per path; load average ${loadAverageNow()} at the start\n`,
  );
  const results = new Map<string, Array<Record<string, number>>>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of round % 2 ? [...specs].reverse() : specs) {
      const inspectPort = await freePort();
      const args = [`--inspect=127.0.0.1:${inspectPort}`];
      const entry = entries.get(s.commit) ?? '';
      const name = `gateway-${s.name}-${round}`;
      const g = NATIVE
        ? await parts.startNativeGateway(name, entry, s.bin, args)
        : await parts.startNodeGateway(name, entry, args);
      const ins = await inspector(inspectPort);
      try {
        const r: Record<string, number> = {};
        for (const path of PATHS) for (let i = 0; i < WARMUP; i++) await get(g.opsUrl + path);
        const latencies: number[] = [];
        for (let i = 0; i < REQUESTS; i++) {
          const t0 = performance.now();
          r.bytes = await get(`${g.opsUrl}/metrics`);
          latencies.push(performance.now() - t0);
          await new Promise((res) => setTimeout(res, GAP_MS));
        }
        r.median = median(latencies);
        r.p90 = p90(latencies);
        await ins.send('HeapProfiler.enable');
        for (const path of PATHS) {
          await ins.send('HeapProfiler.startSampling', {
            samplingInterval: SAMPLE_BYTES,
            includeObjectsCollectedByMajorGC: true,
            includeObjectsCollectedByMinorGC: true,
          });
          for (let i = 0; i < REQUESTS; i++) await get(g.opsUrl + path);
          const { profile } = await ins.send<{ profile: { head: ProfileNode } }>('HeapProfiler.stopSampling');
          const { total, inclusive } = summarize(profile.head);
          r[path] = total / REQUESTS;
          if (path === '/metrics' && TOP > 0) {
            for (const [fn, bytes] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, TOP))
              process.stdout.write(`  ${kib(bytes / REQUESTS).padStart(8)} KiB  ${fn}\n`);
          }
        }
        results.set(s.name, [...(results.get(s.name) ?? []), r]);
        process.stdout.write(
          `round ${round + 1} ${s.name}: /metrics ${kib(r['/metrics'] ?? 0)} KiB allocated per scrape ` +
            `(${r.bytes} bytes of text), /readyz ${kib(r['/readyz'] ?? 0)}, /healthz ${kib(r['/healthz'] ?? 0)} KiB; ` +
            `scrape latency median ${r.median?.toFixed(2)} ms, p90 ${r.p90?.toFixed(2)} (load ${loadAverageNow()})\n`,
        );
      } finally {
        ins.close();
        await g.proc.stop(STOP_GRACE_MS);
      }
    }
  }
  for (const { name } of specs) {
    const rs = results.get(name) ?? [];
    const m = (k: string) => median(rs.map((r) => r[k] ?? Number.NaN));
    process.stdout.write(
      `${name}: median /metrics ${kib(m('/metrics'))} KiB per scrape (${rs.map((r) => kib(r['/metrics'] ?? 0)).join(' / ')}), ` +
        `/readyz ${kib(m('/readyz'))}, /healthz ${kib(m('/healthz'))} KiB; scrape latency median ${m('median').toFixed(2)} ms, p90 ${m('p90').toFixed(2)}\n`,
    );
  }
  process.stdout.write(`load average ${loadAverageNow()} at the end\n`);
} finally {
  await parts.stop();
}
