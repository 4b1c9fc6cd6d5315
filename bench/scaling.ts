/**
 * Scaling (issue 13): what the per-replica limiter costs the gateway per call, and how long a call to an
 * app scaled to zero takes to answer in local mode (a cold start).
 *
 * Limiter: the same load through two gateway processes, one calling through the balancer (as shipped)
 * and one with it bypassed (APPHOST_BENCH_LIMITER=off), interleaved over `rounds`; the gateway CPU per
 * call of each (best round). The balancer's own bookkeeping is also timed in this process (no I/O):
 * placing a call on a replica and freeing its slot, N times.
 *
 * Cold start: `apphost dev` (a child, on the benchmark's NATS) with one app at `min_replicas = 0` and
 * short autoscaler windows; each round waits for the autoscaler's "1 → 0" line, then times one call
 * until its 200 (the held call, the wake, the runtime process starting, its readiness, the call).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_BALANCER_SETTINGS } from '../src/gateway/balancer/balancer.ts';
import { placeCall } from '../src/gateway/balancer/place.ts';
import { AppPool } from '../src/gateway/balancer/pool.ts';
import { type BenchContext, errorNote } from './support/context.ts';
import type { LoadResult } from './support/load.ts';
import { APP, ECHO_APP_DIR, PROJECT, procCpuSeconds, REPO_ROOT, tempDir } from './support/parts.ts';
import { fmtMs, fmtRate } from './support/stats.ts';
import { ECHO_BODY } from './sync-overhead.ts';

/** Cold starts measured. */
const COLD_ROUNDS = 5;
/** Bound on `apphost dev` starting, and on each scale-to-zero between rounds. */
const DEV_STEP_MS = 120_000;

export async function scaling(ctx: BenchContext): Promise<void> {
  await limiterCost(ctx);
  await coldStartLocal(ctx);
}

async function limiterCost(ctx: BenchContext): Promise<void> {
  const { report, settings, load } = ctx;
  await inProcessCost(ctx);
  if (!load) {
    report.unavailable(
      'scaling',
      'gateway CPU per request, limiter on/off',
      ctx.loadMissing ?? 'no load generator',
    );
    return;
  }
  const [on, off, token] = await Promise.all([
    ctx.parts.gateway(),
    ctx.parts.gatewayNoLimiter(),
    ctx.parts.token(),
  ]);
  const variants = [
    { name: 'limiter on', gw: on, best: undefined as LoadResult | undefined, cpuUs: Number.NaN },
    { name: 'limiter off', gw: off, best: undefined as LoadResult | undefined, cpuUs: Number.NaN },
  ];
  const spec = (url: string, durationSeconds: number) => ({
    url,
    method: 'POST' as const,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: ECHO_BODY,
    connections: settings.connections,
    durationSeconds,
  });
  for (let round = 0; round < settings.rounds; round++) {
    for (const v of variants) {
      const url = `${v.gw.url}/v4/${PROJECT}/${APP}/echo`;
      if (settings.warmupSeconds > 0) await load.run(spec(url, settings.warmupSeconds));
      const cpu0 = procCpuSeconds(v.gw.pid);
      const r = await load.run(spec(url, settings.durationSeconds));
      const cpuUs = ((procCpuSeconds(v.gw.pid) - cpu0) * 1e6) / r.requests;
      process.stdout.write(
        `    round ${round + 1}/${settings.rounds}: ${v.name}: ${fmtRate(r.rps, 'req/s')}, ${cpuUs.toFixed(0)} µs CPU/call\n`,
      );
      if (!v.best || r.rps > v.best.rps) {
        v.best = r;
        v.cpuUs = cpuUs;
      }
    }
  }
  for (const v of variants) {
    const r = v.best as LoadResult;
    report.row({
      benchmark: 'scaling',
      variant: `gateway → runtime, ${v.name}`,
      throughput: fmtRate(r.rps, 'req/s'),
      p50: fmtMs(r.p50Ms),
      p99: fmtMs(r.p99Ms),
      other: `≈${v.cpuUs.toFixed(0)} µs of gateway CPU per call (best of ${settings.rounds})${errorNote(r)}`,
    });
  }
  const [a, b] = variants as [(typeof variants)[0], (typeof variants)[0]];
  report.row({
    benchmark: 'scaling',
    variant: 'limiter cost per call (on − off)',
    other: `≈${(a.cpuUs - b.cpuUs).toFixed(1)} µs of gateway CPU (goal ≤ 10 µs; end to end, so within the run's noise)`,
  });
}

/** The balancer's bookkeeping alone, per call: acquire a slot, place, free it (CPU of this process). */
async function inProcessCost(ctx: BenchContext): Promise<void> {
  const pool = new AppPool('bench/echo', {
    capacity: 100,
    maxQueue: 1_000,
    queueTimeoutMs: 30_000,
    coldStartTimeoutMs: 60_000,
    retryAfterSeconds: 5,
  });
  pool.setReplicas([
    { id: 'a', url: 'http://a' },
    { id: 'b', url: 'http://b' },
  ]);
  const n = 200_000;
  const run = async (withLimiter: boolean) => {
    const t0 = process.cpuUsage();
    for (let i = 0; i < n; i++) {
      if (withLimiter) {
        const { lease } = await placeCall(pool, DEFAULT_BALANCER_SETTINGS, async () => ({ value: i }));
        lease.release();
      } else await (async () => ({ value: i }))();
    }
    const d = process.cpuUsage(t0);
    return (d.user + d.system) / n;
  };
  // A first pass of each warms the JIT.
  await run(true);
  await run(false);
  const on = await run(true);
  const off = await run(false);
  ctx.report.row({
    benchmark: 'scaling',
    variant: 'balancer bookkeeping per call (in process)',
    other: `≈${(on - off).toFixed(2)} µs CPU: place on the least-loaded replica + free the slot (${n} calls, 2 replicas)`,
  });
}

async function coldStartLocal(ctx: BenchContext): Promise<void> {
  const { report } = ctx;
  const dir = tempDir('apphost-bench-cold-');
  const appDir = join(dir, 'apps', 'cold');
  mkdirSync(appDir, { recursive: true });
  copyFileSync(join(ECHO_APP_DIR, 'main.py'), join(appDir, 'main.py'));
  writeFileSync(
    join(appDir, 'apphost.toml'),
    '[app]\nname = "cold"\n\n[app.scaling]\nmin_replicas = 0\nmax_replicas = 1\ncooldown = 0\n',
  );
  const credsFile = join(dir, 'credentials.json');
  const nats = await ctx.parts.nats();
  let output = '';
  const child: ChildProcess = spawn(
    process.execPath,
    [
      join(REPO_ROOT, 'src', 'cli', 'main.ts'),
      'dev',
      '--apps',
      join(dir, 'apps'),
      '--port',
      '0',
      '--management-port',
      '0',
      '--ops-port',
      '0',
      '--state-dir',
      join(dir, 'state'),
      '--credentials-out',
      credsFile,
      '--no-watch',
    ],
    {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        NATS_URL: nats.url,
        APPHOST_CONFIG: join(dir, 'cli-config.json'),
        APPHOST_AUTOSCALER_TICK_MS: '200',
        APPHOST_AUTOSCALER_STABLE_WINDOW_MS: '1000',
        APPHOST_AUTOSCALER_PANIC_WINDOW_MS: '200',
        APPHOST_AUTOSCALER_REPORT_TTL_MS: '1000',
        APPHOST_LOAD_REPORT_INTERVAL_MS: '200',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  child.stdout?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  const until = async (what: string, check: () => boolean) => {
    const deadline = Date.now() + DEV_STEP_MS;
    while (!check()) {
      if (child.exitCode !== null) throw new Error(`apphost dev exited: ${output.slice(-2000)}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const zeros = () => output.split('local/cold: 1 → 0 replicas').length - 1;
  try {
    await until('apphost dev', () => existsSync(credsFile));
    const creds = JSON.parse(readFileSync(credsFile, 'utf8')) as { api_url: string; run_token: string };
    const times: number[] = [];
    for (let i = 0; i < COLD_ROUNDS; i++) {
      await until('the app scaled to zero', () => zeros() > i);
      const t0 = performance.now();
      const res = await fetch(`${creds.api_url}/v4/local/cold/echo`, {
        method: 'POST',
        headers: { authorization: `Bearer ${creds.run_token}`, 'content-type': 'application/json' },
        body: ECHO_BODY,
        signal: AbortSignal.timeout(DEV_STEP_MS),
      });
      await res.text();
      if (res.status !== 200) throw new Error(`the cold call answered ${res.status}`);
      times.push(performance.now() - t0);
      process.stdout.write(`    cold start ${i + 1}/${COLD_ROUNDS}: ${fmtMs(times.at(-1) ?? 0)}\n`);
    }
    times.sort((x, y) => x - y);
    report.row({
      benchmark: 'scaling',
      variant: 'cold start, local mode (scaled to zero → first 200)',
      p50: fmtMs(times[Math.floor(times.length / 2)] ?? Number.NaN),
      p99: fmtMs(times.at(-1) ?? Number.NaN),
      other: `${COLD_ROUNDS} cold starts of the echo app (Python runtime process start + import + readiness + the call); p99 column = slowest`,
    });
  } catch (err) {
    report.unavailable('scaling', 'cold start, local mode', (err as Error).message.slice(0, 300));
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => {
      if (child.exitCode !== null) r(undefined);
      else child.once('exit', r);
      setTimeout(r, 30_000).unref();
    });
    if (child.exitCode === null) child.kill('SIGKILL');
  }
}
