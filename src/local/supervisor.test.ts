import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Clock, systemClock } from '../shared/clock.ts';
import { silentLogger } from '../shared/log.ts';
import { nodeSpawner, trackingSpawner } from './spawner.ts';
import { backoffDelay, createSupervisor, type Supervisor } from './supervisor.ts';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const isZombie = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z') ?? false;
  } catch {
    return false;
  }
};

async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('backoffDelay', () => {
  it.each([
    [0, 0],
    [1, 100],
    [2, 200],
    [3, 400],
    [4, 800],
    [5, 1000],
    [50, 1000],
  ])('crash %i waits %i ms', (crashes, want) => {
    expect(backoffDelay(crashes, { backoffInitialMs: 100, backoffMaxMs: 1000 })).toBe(want);
  });
});

describe('supervisor (real child processes)', () => {
  let dir: string;
  let sup: Supervisor | undefined;
  const lines: string[] = [];
  const sleeps: number[] = [];
  /** The real clock, recording the restart delays the supervisor asks for. */
  const recordingClock: Clock = {
    now: systemClock.now,
    sleep: (ms, signal) => {
      sleeps.push(ms);
      return systemClock.sleep(ms, signal);
    },
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'apphost-sup-'));
    lines.length = 0;
    sleeps.length = 0;
  });
  afterEach(async () => {
    await sup?.stopAll();
    sup = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  const script = (name: string, body: string) => {
    const file = join(dir, name);
    writeFileSync(file, body);
    return file;
  };

  it('restarts a crashing process with growing delays, output prefixed with the app name', async () => {
    const crash = script('crash.mjs', `console.log('boot ' + process.pid); process.exit(3);`);
    sup = createSupervisor({
      spawner: nodeSpawner,
      log: silentLogger(),
      output: (l) => lines.push(l),
      clock: recordingClock,
      settings: { backoffInitialMs: 20, backoffMaxMs: 80, stableAfterMs: 60_000, killMarginMs: 1000 },
    });
    sup.add({
      name: 'crashy',
      spec: () => ({ command: process.execPath, args: [crash], cwd: dir, env: process.env }),
      graceMs: () => 1000,
    });
    await until('5 starts', () => (sup?.status('crashy')?.starts ?? 0) >= 5);
    expect(sleeps.slice(0, 4)).toEqual([20, 40, 80, 80]);
    expect(sup.status('crashy')?.consecutiveCrashes).toBeGreaterThanOrEqual(4);
    expect(lines.filter((l) => /^\[crashy\] boot \d+$/.test(l)).length).toBeGreaterThanOrEqual(4);
  });

  it('restart() replaces the process and resets the backoff; stopAll sends SIGTERM', async () => {
    const serve = script(
      'serve.mjs',
      // The handler goes in before the pid line: the test signals as soon as it reads that line.
      `process.on('SIGTERM', () => { console.log('bye'); process.exit(0); }); console.log('pid ' + process.pid); setInterval(() => {}, 1000);`,
    );
    sup = createSupervisor({ spawner: nodeSpawner, log: silentLogger(), output: (l) => lines.push(l) });
    sup.add({
      name: 'web',
      spec: () => ({ command: process.execPath, args: [serve], cwd: dir, env: process.env }),
      graceMs: () => 5000,
    });
    await until('first pid line', () => lines.some((l) => l.startsWith('[web] pid')));
    const first = sup.status('web')!.pid!;
    await sup.restart('web');
    const second = sup.status('web')!.pid!;
    expect(second).not.toBe(first);
    expect(alive(first)).toBe(false);
    // 'exit' may come before the last piped output line has been read.
    await until('bye', () => lines.includes('[web] bye'));
    expect(sup.status('web')).toMatchObject({ running: true, starts: 2, consecutiveCrashes: 0 });
    await sup.stopAll();
    expect(alive(second)).toBe(false);
    expect(sup.status('web')?.running).toBe(false);
  });

  it('stopping an app also ends what it spawned, even a helper that ignores SIGTERM', async () => {
    const helper = script(
      'helper.mjs',
      `process.on('SIGTERM', () => {}); console.log('helper ' + process.pid); setInterval(() => {}, 1000);`,
    );
    const parent = script(
      'parent.mjs',
      `import { spawn } from 'node:child_process';
spawn(process.execPath, [${JSON.stringify(helper)}], { stdio: ['ignore', 'inherit', 'ignore'] });
process.on('SIGTERM', () => process.exit(0));
setInterval(() => {}, 1000);`,
    );
    sup = createSupervisor({ spawner: nodeSpawner, log: silentLogger(), output: (l) => lines.push(l) });
    sup.add({
      name: 'parent',
      spec: () => ({ command: process.execPath, args: [parent], cwd: dir, env: process.env }),
      graceMs: () => 5_000,
    });
    await until('helper', () => lines.some((l) => l.startsWith('[parent] helper ')));
    const helperPid = Number(lines.find((l) => l.startsWith('[parent] helper '))?.split(' ')[2]);
    expect(alive(helperPid)).toBe(true);
    try {
      await sup.stopAll();
      // The orphaned helper may linger as a zombie until init reaps it: count that as gone.
      await until('helper gone', () => !alive(helperPid) || isZombie(helperPid), 5_000);
    } finally {
      if (alive(helperPid)) process.kill(helperPid, 'SIGKILL');
    }
  });

  it('SIGKILLs a process that ignores SIGTERM once its grace period is over', async () => {
    const stubborn = script(
      'stubborn.mjs',
      `process.on('SIGTERM', () => console.log('ignoring')); console.log('up'); setInterval(() => {}, 1000);`,
    );
    const spawner = trackingSpawner(nodeSpawner);
    sup = createSupervisor({
      spawner,
      log: silentLogger(),
      output: (l) => lines.push(l),
      settings: { killMarginMs: 100 },
    });
    sup.add({
      name: 'stubborn',
      spec: () => ({ command: process.execPath, args: [stubborn], cwd: dir, env: process.env }),
      graceMs: () => 300,
    });
    await until('up', () => lines.includes('[stubborn] up'));
    const pid = sup.status('stubborn')!.pid!;
    await sup.stopAll();
    expect(lines).toContain('[stubborn] ignoring');
    expect(alive(pid)).toBe(false);
    expect(spawner.live()).toEqual([]);
    // stopped on purpose: not restarted
    await new Promise((r) => setTimeout(r, 200));
    expect(sup.status('stubborn')?.starts).toBe(1);
  });

  it('reports a command that cannot start as a crash and keeps retrying', async () => {
    sup = createSupervisor({
      spawner: nodeSpawner,
      log: silentLogger(),
      output: () => {},
      settings: { backoffInitialMs: 10, backoffMaxMs: 20 },
    });
    sup.add({
      name: 'missing',
      spec: () => ({ command: join(dir, 'no-such-binary'), args: [], cwd: dir, env: process.env }),
      graceMs: () => 100,
    });
    await until('3 starts', () => (sup?.status('missing')?.starts ?? 0) >= 3);
    expect(sup.status('missing')?.running).toBe(false);
  });
});
