/**
 * The gateway as two processes on one port (APPHOST_GATEWAY_PROCESSES=2), a real process tree against
 * real NATS and the real Python runtime: calls are served by both processes, the pod's /metrics and
 * /readyz speak for both, each process reports load to the autoscaler under its own id, a killed
 * process is replaced, replicaConcurrency 1 holds across both, and SIGTERM drains both within the bound.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { effectiveScaling } from '../../../src/apis/v1alpha1/scaling.ts';
import { LoadAggregator } from '../../../src/autoscaler/load-aggregator.ts';
import { LOAD_SUBJECTS, type LoadReport, LoadReportSchema } from '../../../src/shared/contracts/scaling.ts';
import { generateSigningKey, issueRunToken } from '../../../src/shared/run-tokens.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { maxOverlap } from '../../harness/overlap.ts';
import { freePort, waitFor } from '../../harness/process.ts';
import { REPO_ROOT, type Runtime, resolvedApp, sample, startRuntime, tempDir } from './helpers.ts';

const P = 'proj-procs';
const START_TIMEOUT_MS = 90_000;
const REPORT_INTERVAL_MS = 200;
/** The autoscaler's default APPHOST_AUTOSCALER_REPORT_TTL_MS. */
const REPORT_TTL_MS = 5_000;
const DRAIN_MS = 5_000;
const RUN_STOP_MS = 2_000;
const HANDOVER_MS = 500;
const OUTBOX_CLOSE_MS = 1_000;
/** gatewayShutdownBoundMs of these settings (+10 s for NATS and ops) + the primary's 2 s margin. */
const SHUTDOWN_BOUND_MS = HANDOVER_MS + DRAIN_MS + RUN_STOP_MS + OUTBOX_CLOSE_MS + 10_000 + 2_000;

const dir = tempDir('apphost-procs-');
let nats: NatsServer;
let nc: NatsConnection;
let wide: Runtime;
let limited: Runtime;
let primary: ChildProcess;
let port: number;
let opsPort: number;
let token: string;
/** What the autoscaler keeps of the load reports, fed as its loop feeds it. */
const loads = new LoadAggregator(REPORT_TTL_MS);
const seenPids = new Set<number>();

/** The primary's children: the gateway processes. */
function processPids(): number[] {
  const pid = primary.pid as number;
  try {
    const list = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    const pids = list ? list.split(' ').map(Number) : [];
    for (const p of pids) seenPids.add(p);
    return pids;
  } catch {
    return [];
  }
}

/** One call on a connection of its own: the primary hands each new connection to the next process. */
async function call(app: string, fn: string, body: unknown) {
  const agent = new Agent();
  try {
    const res = await request(`http://127.0.0.1:${port}/v4/${P}/${app}/${fn}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
      dispatcher: agent,
    });
    return { status: res.statusCode, body: await res.body.text() };
  } finally {
    await agent.close();
  }
}

async function metrics(): Promise<string> {
  return (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
}

/** Reporter ids heard on the load subjects during `ms`. */
async function reporters(ms: number): Promise<Set<string>> {
  const seen = new Set<string>();
  const sub = nc.subscribe(LOAD_SUBJECTS, {
    callback: (_err, msg) => {
      seen.add((msg.json() as LoadReport).reporter);
    },
  });
  await new Promise((r) => setTimeout(r, ms));
  sub.unsubscribe();
  return seen;
}

function executions(marker: string): Array<{ start: number; end: number }> {
  return readFileSync(marker, 'utf8')
    .trim()
    .split('\n')
    .map((line) => {
      const [start, end] = line.split(' ').map(Number);
      return { start: start ?? 0, end: end ?? 0 };
    });
}

beforeAll(async () => {
  let keys: Awaited<ReturnType<typeof generateSigningKey>>;
  [nats, wide, limited, keys, port, opsPort] = await Promise.all([
    startNats(),
    startRuntime(),
    startRuntime(undefined, ['--max-concurrency', '1']),
    generateSigningKey(),
    freePort(),
    freePort(),
  ]);
  nc = await connect({ servers: nats.url });
  nc.subscribe(LOAD_SUBJECTS, {
    callback: (_err, msg) => {
      const parsed = LoadReportSchema.safeParse(msg.json());
      if (parsed.success) loads.record(parsed.data, Date.now());
    },
  });
  const keysFile = join(dir, 'run-token-keys.json');
  writeFileSync(keysFile, JSON.stringify({ keys: [keys] }));
  token = await issueRunToken({ keys: [keys] }, P, new Date(Date.now() + 3600_000));
  const apps = [
    resolvedApp(P, 'wide', wide.url),
    resolvedApp(P, 'limited', limited.url, {
      scaling: effectiveScaling({ replicaConcurrency: 1, maxReplicas: 1 }),
    }),
  ];
  primary = spawn(process.execPath, [join(REPO_ROOT, 'test/integration/gateway/entry.ts')], {
    env: {
      ...process.env,
      NATS_URL: nats.url,
      APPHOST_LOG_LEVEL: 'info',
      APPHOST_GATEWAY_PROCESSES: '2',
      APPHOST_GATEWAY_HOST: '127.0.0.1',
      APPHOST_GATEWAY_PORT: String(port),
      APPHOST_OPS_PORT: String(opsPort),
      APPHOST_PLATFORM_KEY: 'procs-test-platform-key-0123',
      APPHOST_RUN_TOKEN_KEYS_FILE: keysFile,
      APPHOST_LOAD_REPORT_INTERVAL_MS: String(REPORT_INTERVAL_MS),
      APPHOST_GATEWAY_DRAIN_TIMEOUT_MS: String(DRAIN_MS),
      APPHOST_RUN_STOP_TIMEOUT_MS: String(RUN_STOP_MS),
      APPHOST_GATEWAY_CONNECTION_HANDOVER_MS: String(HANDOVER_MS),
      APPHOST_GATEWAY_WEBHOOK_OUTBOX_CLOSE_MS: String(OUTBOX_CLOSE_MS),
      APPHOST_TEST_APPS: JSON.stringify(apps),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = createWriteStream(join(dir, 'gateway.log'));
  primary.stdout?.pipe(log);
  primary.stderr?.pipe(log);
  let exited = false;
  primary.once('exit', () => {
    exited = true;
  });
  await waitFor(
    `the gateway's 2 processes ready (log: ${dir}/gateway.log)`,
    async () => {
      if (exited) throw new Error(`the gateway exited; see ${dir}/gateway.log`);
      return (await fetch(`http://127.0.0.1:${opsPort}/readyz`).catch(() => undefined))?.ok === true;
    },
    START_TIMEOUT_MS,
  );
  await waitFor(
    'both processes listening',
    async () => sample(await metrics(), 'apphost_gateway_processes') === 2,
    START_TIMEOUT_MS,
  );
});

afterAll(async () => {
  if (primary && primary.exitCode === null) primary.kill('SIGKILL');
  for (const pid of seenPids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await nc?.close();
  await Promise.all([wide?.proc.stop(5_000), limited?.proc.stop(5_000)]);
  await nats?.stop();
});

describe('APPHOST_GATEWAY_PROCESSES=2', () => {
  it('serves calls from both processes; /metrics shows each process as its own series', async () => {
    expect(processPids()).toHaveLength(2);
    const results = await Promise.all([1, 2, 3, 4].map((n) => call('wide', 'echo', { n })));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(JSON.parse(results[0]?.body ?? '')).toEqual({ echo: { n: 1 } });
    const m = await metrics();
    const served = (k: string) =>
      sample(m, 'apphost_gateway_requests_total', { gateway_process: k, app: 'wide', status: '200' });
    expect(served('1')).toBeGreaterThan(0);
    expect(served('2')).toBeGreaterThan(0);
    expect(served('1') + served('2')).toBe(4);
    expect(sample(m, 'apphost_gateway_processes', { gateway_process: 'primary' })).toBe(2);
    expect((await fetch(`http://127.0.0.1:${opsPort}/healthz`)).status).toBe(200);
  });

  it('each process reports load to the autoscaler under its own id, and the autoscaler adds them up', async () => {
    const ids = await reporters(REPORT_INTERVAL_MS * 5);
    expect(ids.size).toBe(2);
    // One held call in each process: the autoscaler's view of the app is 2 in flight from 2 reporters.
    const gate = join(dir, 'gate-load');
    const calls = [1, 2].map(() => call('wide', 'gated', { gate }));
    try {
      await waitFor(
        'the autoscaler sees 1 call in flight from each process',
        async () => {
          const t = loads.totals(`${P}/wide`, Date.now());
          return t.inflight === 2 && t.reporters === 2;
        },
        START_TIMEOUT_MS,
      );
    } finally {
      writeFileSync(gate, '');
    }
    expect((await Promise.all(calls)).map((r) => r.status)).toEqual([200, 200]);
  });

  it('keeps replicaConcurrency 1 across both processes (the runtime refuses the other one)', async () => {
    const marker = join(dir, 'limited');
    const results = await Promise.all(
      [1, 2, 3, 4].map(() => call('limited', 'timed', { marker, seconds: 0.5 })),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const runs = executions(marker);
    expect(runs).toHaveLength(4);
    expect(maxOverlap(runs)).toBe(1);
    const m = await metrics();
    for (const k of ['1', '2'])
      expect(
        sample(m, 'apphost_gateway_requests_total', { gateway_process: k, app: 'limited' }),
      ).toBeGreaterThan(0);
  });

  it(
    'replaces a killed process; calls go on meanwhile and the dead one stops reporting',
    async () => {
      const before = await reporters(REPORT_INTERVAL_MS * 5);
      const [victim, survivor] = processPids() as [number, number];
      process.kill(victim, 'SIGKILL');
      // Once the primary has seen the exit (it restarts after a 1 s pause), the survivor takes every
      // new connection. (A connection handed over in the instant of the crash is lost with it:
      // docs/gateway.md#several-processes.)
      await waitFor(
        'the primary saw the exit',
        async () => sample(await metrics(), 'apphost_gateway_process_restarts_total') === 1,
        START_TIMEOUT_MS,
      );
      expect((await call('wide', 'echo', { during: true })).status).toBe(200);
      await waitFor(
        'a new process in its place, listening',
        async () => {
          const pids = processPids();
          const m = await metrics();
          return (
            pids.length === 2 &&
            !pids.includes(victim) &&
            pids.includes(survivor) &&
            sample(m, 'apphost_gateway_processes') === 2 &&
            sample(m, 'apphost_gateway_process_restarts_total') === 1
          );
        },
        START_TIMEOUT_MS,
      );
      await waitFor(
        'the pod ready again',
        async () => (await fetch(`http://127.0.0.1:${opsPort}/readyz`)).ok,
        START_TIMEOUT_MS,
      );
      const after = await reporters(REPORT_INTERVAL_MS * 5);
      expect(after.size).toBe(2);
      // One reporter id carried on (the survivor), one is new; the dead one is silent...
      expect([...after].filter((id) => before.has(id))).toHaveLength(1);
      // ...and the autoscaler forgets it after its report ttl, like a dead gateway pod.
      const gone: string[] = [];
      await waitFor(
        "the autoscaler dropped the dead process's reports",
        async () => {
          gone.push(...loads.expire(Date.now()));
          return loads.reporters === 2 && gone.some((id) => before.has(id) && !after.has(id));
        },
        START_TIMEOUT_MS,
      );
      const results = await Promise.all([1, 2, 3, 4].map((n) => call('wide', 'echo', { n })));
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    },
    2 * START_TIMEOUT_MS,
  );

  it(
    'on SIGTERM, both processes finish their in-flight calls and the whole tree exits 0 within the bound',
    async () => {
      const pids = processPids();
      expect(pids).toHaveLength(2);
      const marker = join(dir, 'slow');
      // Two calls on two connections: one in each process.
      const calls = [1, 2].map(() => call('wide', 'sleep', { seconds: 1.5, marker }));
      await waitFor(
        'a call in flight in each process',
        async () => {
          const m = await metrics();
          return ['1', '2'].every(
            (k) => sample(m, 'apphost_gateway_inflight_requests', { gateway_process: k }) === 1,
          );
        },
        START_TIMEOUT_MS,
      );
      const exited = new Promise<number | null>((resolve) => primary.once('exit', (code) => resolve(code)));
      primary.kill('SIGTERM');
      const results = await Promise.all(calls);
      expect(results.map((r) => r.status)).toEqual([200, 200]);
      expect(readFileSync(marker, 'utf8').trim().split('\n')).toEqual(['done', 'done']);
      const code = await Promise.race([
        exited,
        new Promise<'bound passed'>((r) => setTimeout(() => r('bound passed'), SHUTDOWN_BOUND_MS + 5_000)),
      ]);
      expect(code).toBe(0);
      for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
    },
    2 * START_TIMEOUT_MS,
  );
});
