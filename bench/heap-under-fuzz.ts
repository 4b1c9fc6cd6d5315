/**
 * `node bench/heap-under-fuzz.ts`: is anything retained under random, mostly-invalid traffic? Runs
 * `apphost dev` (gateway, run worker, dispatcher and management API in one process) with the inspector
 * on, sends rounds of mutated requests, and after each round forces a full GC through the inspector and
 * records the heap still in use next to the RSS. A leak shows as heap-after-GC growing round over round;
 * RSS growing while heap-after-GC stays flat is the allocator keeping freed pages (not a leak).
 *
 * Settings (env): FUZZ_ROUNDS (10), FUZZ_REQUESTS_PER_ROUND (2000), FUZZ_CONCURRENCY (16), FUZZ_SEED.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { request } from 'undici';

const REPO = resolve(import.meta.dirname, '..');
const ROUNDS = Number(process.env.FUZZ_ROUNDS ?? 10);
const PER_ROUND = Number(process.env.FUZZ_REQUESTS_PER_ROUND ?? 2000);
const CONCURRENCY = Number(process.env.FUZZ_CONCURRENCY ?? 16);
const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 1_000_000);
/** Bound on `apphost dev` printing its credentials. */
const START_TIMEOUT_MS = 180_000;
/** Bound on one fuzz request. */
const REQUEST_TIMEOUT_MS = 30_000;

/** mulberry32: a small seeded generator, so a run can be repeated. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Inspector {
  #ws: WebSocket;
  #id = 0;
  #waiting = new Map<number, (v: unknown) => void>();
  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.addEventListener('message', (e) => {
      const msg = JSON.parse(String(e.data)) as { id?: number; result?: unknown };
      if (msg.id !== undefined) this.#waiting.get(msg.id)?.(msg.result);
    });
  }
  static async open(url: string): Promise<Inspector> {
    const ws = new WebSocket(url);
    await new Promise((r, j) => {
      ws.addEventListener('open', r, { once: true });
      ws.addEventListener('error', j, { once: true });
    });
    return new Inspector(ws);
  }
  call(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = ++this.#id;
    this.#ws.send(JSON.stringify({ id, method, params }));
    return new Promise((r) => this.#waiting.set(id, r));
  }
  async memory(): Promise<{ heapUsed: number; rss: number; external: number; arrayBuffers: number }> {
    await this.call('HeapProfiler.enable');
    await this.call('HeapProfiler.collectGarbage');
    await this.call('HeapProfiler.collectGarbage');
    const r = (await this.call('Runtime.evaluate', {
      expression: 'JSON.stringify(process.memoryUsage())',
      returnByValue: true,
    })) as { result: { value: string } };
    return JSON.parse(r.result.value);
  }
  close() {
    this.#ws.close();
  }
}

function mutate(next: () => number, creds: { project_id: string; run_token: string }) {
  const pick = <T>(xs: T[]): T => xs[Math.floor(next() * xs.length)] as T;
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(next() * 256)));
  const bodies = [
    () => Buffer.from(JSON.stringify({ name: 'x'.repeat(Math.floor(next() * 5000)) })),
    () => bytes(Math.floor(next() * 4096)),
    () => Buffer.from(`{"a":${'['.repeat(Math.floor(next() * 3000))}`),
    () => Buffer.from('{"name":1e999999}'),
    () => Buffer.from(JSON.stringify({ seconds: 0, n: next() })),
    () => Buffer.from(''),
    // Now and then a body near the gateway's 10 MiB limit, or over it: the peak the attack saw in RSS.
    () => (next() < 0.1 ? bytes(Math.floor(next() * 12 * 1024 * 1024)) : Buffer.from('{}')),
  ];
  const paths = [
    `/v4/${creds.project_id}/hello/run`,
    `/v4/${creds.project_id}/hello/nope`,
    `/v4/${creds.project_id}/slow/run`,
    `/v4/${creds.project_id}/ghost/run`,
    `/v4/other/hello/run`,
    `/v4/${creds.project_id}/hello/%2e%2e/run`,
    `/${bytes(8).toString('hex')}`,
  ];
  const queries = [
    '',
    '?async=true',
    '?async=maybe',
    `?webhookEndpoint=${encodeURIComponent('http://169.254.169.254/')}`,
    `?async=true&webhookEndpoint=${encodeURIComponent('http://[64:ff9b::a9fe:a9fe]/')}`,
    `?webhookEndpoint=${encodeURIComponent(`http://127.0.0.1:9/${'x'.repeat(3000)}`)}`,
  ];
  const tokens = [creds.run_token, `${creds.run_token.slice(0, -4)}AAAA`, 'garbage', ''];
  return () => ({
    path: pick(paths) + pick(queries),
    body: pick(bodies)(),
    token: pick(tokens),
    contentType: pick(['application/json', 'text/plain', 'application/octet-stream']),
  });
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'apphost-heap-fuzz-'));
  const credsFile = join(dir, 'credentials.json');
  const child: ChildProcess = spawn(
    process.execPath,
    [
      '--inspect=127.0.0.1:0',
      join(REPO, 'src/cli/main.ts'),
      'dev',
      '--apps',
      join(REPO, 'examples/apps'),
      '--port',
      '0',
      '--management-port',
      '0',
      '--ops-port',
      '0',
      '--credentials-out',
      credsFile,
    ],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, APPHOST_LOG_LEVEL: 'error' } },
  );
  const stop = () => {
    if (child.exitCode === null) child.kill('SIGTERM');
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    let err = '';
    child.stdout?.resume();
    const wsUrl = await new Promise<string>((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`no inspector URL: ${err}`)), START_TIMEOUT_MS);
      child.stderr?.on('data', (d: Buffer) => {
        err += d.toString();
        const m = /ws:\/\/\S+/.exec(err);
        if (m) {
          clearTimeout(timer);
          res(m[0]);
        }
      });
    });
    const deadline = Date.now() + START_TIMEOUT_MS;
    let creds: { project_id: string; run_token: string; api_url: string } | undefined;
    while (!creds) {
      try {
        creds = JSON.parse(readFileSync(credsFile, 'utf8'));
      } catch {
        if (Date.now() > deadline) throw new Error('apphost dev did not write its credentials');
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    const inspector = await Inspector.open(wsUrl);
    const next = rng(SEED);
    const make = mutate(next, creds);
    const statuses = new Map<number, number>();
    const rows: string[] = [];
    const mb = (n: number) => (n / 1024 / 1024).toFixed(1);
    const show = async (round: number) => {
      const m = await inspector.memory();
      const row = `${round}\t${round * PER_ROUND}\t${mb(m.heapUsed)}\t${mb(m.external)}\t${mb(m.arrayBuffers)}\t${mb(m.rss)}`;
      rows.push(row);
      console.log(row);
    };
    console.log(`seed ${SEED}; round\trequests\theapUsed-after-GC MB\texternal MB\tarrayBuffers MB\tRSS MB`);
    await show(0);
    for (let round = 1; round <= ROUNDS; round++) {
      let sent = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (sent < PER_ROUND) {
            sent++;
            const r = make();
            try {
              const res = await request(`${creds.api_url}${r.path}`, {
                method: 'POST',
                headers: {
                  'content-type': r.contentType,
                  ...(r.token ? { authorization: `Bearer ${r.token}` } : {}),
                },
                body: r.body,
                headersTimeout: REQUEST_TIMEOUT_MS,
                bodyTimeout: REQUEST_TIMEOUT_MS,
              });
              await res.body.dump();
              statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
            } catch {
              statuses.set(0, (statuses.get(0) ?? 0) + 1);
            }
          }
        }),
      );
      await show(round);
    }
    console.log(`statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
    inspector.close();
  } finally {
    stop();
    await new Promise((r) => (child.exitCode === null ? child.once('exit', r) : r(undefined)));
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
