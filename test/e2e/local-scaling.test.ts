/**
 * Scaling in `apphost dev` with real runtime processes (issue 13's scenarios): replicaConcurrency holds
 * inside the runtime, replicas are added under load and the calls overlap, an idle app returns to
 * minReplicas, minReplicas 0 scales to zero and the next call answers after a cold start, an app whose
 * main.py raises on import fails held calls at once naming the error, and a scale-down under steady
 * load loses no call. Windows are shortened through the same variables a cluster install reads.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maxOverlap } from '../harness/overlap.ts';
import { type Credentials, type DevProcess, startDevProcess, until } from './dev-process.ts';

const TIMED = `import os
import time


def timed(marker: str, seconds: float = 1.0):
    start = time.time()
    time.sleep(seconds)
    with open(marker, "a") as f:
        f.write(f"{start} {time.time()} {os.getpid()}\\n")
    return {"pid": os.getpid()}
`;

const apps: Record<string, { scaling: string; main: string }> = {
  single: { scaling: 'min_replicas = 1\nmax_replicas = 1\nreplica_concurrency = 1', main: TIMED },
  trio: {
    scaling:
      'min_replicas = 1\nmax_replicas = 3\nreplica_concurrency = 1\ntarget_utilization = 100\ncooldown = 1',
    main: TIMED,
  },
  zero: { scaling: 'min_replicas = 0\nmax_replicas = 1\ncooldown = 1', main: TIMED },
  // Starts fine at first; once the flag file exists, importing main.py raises (e.g. a model file went away).
  flaky: {
    scaling: 'min_replicas = 0\nmax_replicas = 1\ncooldown = 1',
    main: `import os

if os.path.exists(os.environ["BROKEN_FLAG"]):
    raise RuntimeError("the model file is missing")


def run():
    return 1
`,
  },
};

/** Bound on each scaling step here (the windows below are a few seconds; the machine is busy). */
const STEP_MS = 60_000;

describe('apphost dev scaling (e2e)', () => {
  let dir: string;
  let dev: DevProcess;
  let creds: Credentials;
  let done = false;

  const call = async (app: string, fn: string, body: unknown) => {
    const res = await fetch(`${creds.api_url}/v4/${creds.project_id}/${app}/${fn}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${creds.run_token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(120_000),
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };
  const executions = (marker: string) =>
    readFileSync(marker, 'utf8')
      .trim()
      .split('\n')
      .map((l) => {
        const [start = 0, end = 0, pid = 0] = l.split(' ').map(Number);
        return { start, end, pid };
      });
  /** The autoscaler's decision lines for an app, e.g. "1 → 3". */
  const decisions = (app: string) =>
    [
      ...dev
        .output()
        .matchAll(new RegExp(`autoscaler: ${creds.project_id}/${app}: (\\d+ → \\d+) replicas`, 'g')),
    ].map((m) => m[1]);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'apphost-e2e-scaling-'));
    const appsDir = join(dir, 'apps');
    for (const [name, a] of Object.entries(apps)) {
      mkdirSync(join(appsDir, name), { recursive: true });
      const env = `[app.env]\nBROKEN_FLAG = "${join(dir, 'broken.flag')}"\n`;
      writeFileSync(
        join(appsDir, name, 'apphost.toml'),
        `[app]\nname = "${name}"\n\n[app.scaling]\n${a.scaling}\n\n${env}`,
      );
      writeFileSync(join(appsDir, name, 'main.py'), a.main);
    }
    dev = await startDevProcess({
      appsDir,
      stateDir: join(dir, 'state'),
      credentialsFile: join(dir, 'credentials.json'),
      env: {
        APPHOST_AUTOSCALER_TICK_MS: '250',
        APPHOST_AUTOSCALER_STABLE_WINDOW_MS: '2000',
        APPHOST_AUTOSCALER_PANIC_WINDOW_MS: '600',
        APPHOST_AUTOSCALER_REPORT_TTL_MS: '1500',
        APPHOST_LOAD_REPORT_INTERVAL_MS: '200',
      },
    });
    creds = dev.creds;
  });

  afterAll(async () => {
    if (dev) expect(await dev.stop()).toBe(0);
    dev?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('replicaConcurrency 1, maxReplicas 1: three concurrent 1 s calls never run two at once in the runtime', async () => {
    const marker = join(dir, 'single.log');
    const results = await Promise.all([1, 2, 3].map(() => call('single', 'timed', { marker, seconds: 1 })));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    const runs = executions(marker);
    expect(runs).toHaveLength(3);
    expect(maxOverlap(runs)).toBe(1);
  });

  it('maxReplicas 3: three replicas appear and the calls overlap (never two on one replica)', async () => {
    const marker = join(dir, 'trio.log');
    const results = await Promise.all(
      Array.from({ length: 9 }, () => call('trio', 'timed', { marker, seconds: 1.5 })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(9).fill(200));
    const runs = executions(marker);
    expect(new Set(runs.map((r) => r.pid)).size).toBe(3);
    expect(maxOverlap(runs)).toBeGreaterThan(1);
    for (const pid of new Set(runs.map((r) => r.pid)))
      expect(maxOverlap(runs.filter((r) => r.pid === pid))).toBe(1);
    expect(decisions('trio').some((d) => d?.endsWith('→ 3'))).toBe(true);
  });

  it('idle: back to minReplicas after the cooldown', async () => {
    await until('trio back to 1', () => decisions('trio').some((d) => d?.endsWith('→ 1')), STEP_MS);
  });

  it('minReplicas 0: scaled to zero when idle; the next call answers 200 after a cold start', async () => {
    await until('zero scaled to zero', () => decisions('zero').includes('1 → 0'), STEP_MS);
    const r = await call('zero', 'timed', { marker: join(dir, 'zero.log'), seconds: 0.1 });
    expect(r.status).toBe(200);
    expect(decisions('zero')).toContain('0 → 1');
  });

  it('main.py raises on import: a held call fails with 503 naming the import error, not at the cold-start bound', async () => {
    await until('flaky scaled to zero', () => decisions('flaky').includes('1 → 0'), STEP_MS);
    writeFileSync(join(dir, 'broken.flag'), '');
    const r = await call('flaky', 'run', {});
    expect(r.status).toBe(503);
    expect(r.json.error).toMatchObject({ code: 'app_start_failed', reason: 'CrashLoopBackOff' });
    expect(String((r.json.error as { message?: string }).message)).toContain(
      'RuntimeError: the model file is missing',
    );
  });

  it('a scale-down under steady load loses no call', async () => {
    const marker = join(dir, 'steady.log');
    const statuses: number[] = [];
    const worker = async (until: () => boolean) => {
      while (!until()) statuses.push((await call('trio', 'timed', { marker, seconds: 0.2 })).status);
    };
    // Three callers: the app scales out to 3.
    let heavy = true;
    const seen = decisions('trio').length;
    const light = worker(() => dev.child.exitCode !== null || done);
    const extra = [worker(() => !heavy), worker(() => !heavy)];
    await until(
      'trio at 3 again',
      () =>
        decisions('trio')
          .slice(seen)
          .some((d) => d?.endsWith('→ 3')),
      STEP_MS,
    );
    // Down to one caller: replicas are removed while it keeps calling.
    heavy = false;
    await Promise.all(extra);
    const mark = decisions('trio').length;
    await until(
      'trio scaled down',
      () =>
        decisions('trio')
          .slice(mark)
          .some((d) => d?.startsWith('3 →')),
      STEP_MS,
    );
    await new Promise((r) => setTimeout(r, 1_000));
    done = true;
    await light;
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
  });
});
