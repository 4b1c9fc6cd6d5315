/**
 * Versions of a local app on the real Python runtime: a new version serves only once ready, the old
 * one keeps serving until then (no failed call across the switch), and a broken version never serves.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAppConfig } from '../../../src/apis/v1alpha1/app-config.ts';
import { appFromConfig } from '../../../src/apis/v1alpha1/app-config-mapping.ts';
import { type AppHost, createAppHost } from '../../../src/local/app-host.ts';
import type { LocalApp } from '../../../src/local/app-manifests.ts';
import { createLocalResolver } from '../../../src/local/resolver.ts';
import { nodeSpawner, trackingSpawner } from '../../../src/local/spawner.ts';
import { createSupervisor } from '../../../src/local/supervisor.ts';
import type { ResolvedApp } from '../../../src/shared/contracts/seams.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { waitFor } from '../../harness/process.ts';
import { PYTHON } from '../gateway/helpers.ts';

let root: string;
let host: AppHost;
const spawner = trackingSpawner(nodeSpawner);

function version(name: string, mainPy: string): LocalApp {
  const dir = mkdtempSync(join(root, `${name}-`));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'main.py'), mainPy);
  const config = parseAppConfig(`[app]\nname = "${name}"\n[app.scaling]\nresponse_grace_period = 5\n`);
  return {
    name,
    dir,
    file: join(dir, 'apphost.toml'),
    config,
    manifest: appFromConfig(config),
    gracePeriodSeconds: 5,
  };
}

async function call(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
    signal: AbortSignal.timeout(10_000),
  });
  if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
  return (await res.json()) as string;
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'apphost-apphost-'));
  host = createAppHost({
    supervisor: createSupervisor({ spawner, log: silentLogger(), output: () => {} }),
    python: PYTHON,
    env: { ...process.env },
    log: silentLogger(),
    settings: { drainDelayMs: 500, readyTimeoutMs: 60_000 },
  });
});
afterAll(async () => {
  await host?.stopAll();
  spawner.killAll();
  rmSync(root, { recursive: true, force: true });
});

describe('local app versions (app host)', () => {
  it('a first version: the app is starting (503) until it is ready, then it serves', async () => {
    const v1 = version('greeter', 'def run():\n    return "v1"\n');
    host.reserve(v1);
    expect(host.endpoint('greeter')?.starting).toBe(true);
    expect(await host.rollout(v1, { buildId: 'b1' })).toEqual({ ok: true });
    const ep = host.endpoint('greeter');
    expect(ep?.starting).toBe(false);
    expect(await call(ep?.port ?? 0)).toBe('v1');
    expect(host.current('greeter')?.meta.buildId).toBe('b1');
  });

  it('a new version takes over with no failed call, and the old process is stopped', async () => {
    const oldPid = spawner.live();
    const answers: string[] = [];
    const failures: string[] = [];
    let stop = false;
    const hammer = (async () => {
      while (!stop) {
        const port = host.endpoint('greeter')?.port ?? 0;
        try {
          answers.push(await call(port));
        } catch (err) {
          failures.push(String(err));
        }
      }
    })();
    const v2 = version('greeter', 'import time\ntime.sleep(1)\n\ndef run():\n    return "v2"\n');
    expect(await host.rollout(v2, { buildId: 'b2' })).toEqual({ ok: true });
    // Keep calling until the old process has been retired.
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline && spawner.live().some((p) => oldPid.includes(p)))
      await new Promise((r) => setTimeout(r, 100));
    stop = true;
    await hammer;
    expect(failures).toEqual([]);
    expect(answers).toContain('v1');
    expect(answers.at(-1)).toBe('v2');
    expect(spawner.live().filter((p) => oldPid.includes(p))).toEqual([]);
  });

  it('a version that cannot start never serves; its error is reported and the old one still answers', async () => {
    const broken = version('greeter', 'import no_such_module\n\ndef run():\n    return "v3"\n');
    const r = await host.rollout(broken, { buildId: 'b3' });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.message).toMatch(/exited before it was ready/);
    expect(r.message).toMatch(/ModuleNotFoundError: No module named 'no_such_module'/);
    expect(await call(host.endpoint('greeter')?.port ?? 0)).toBe('v2');
    expect(host.current('greeter')?.meta.buildId).toBe('b2');
  });

  it('remove stops the app', async () => {
    expect(await host.remove('greeter')).toBe(true);
    expect(host.endpoint('greeter')).toBeUndefined();
    expect(await host.remove('greeter')).toBe(false);
  });
});

describe('the local resolver’s app table (watchApps) over the app host', () => {
  it('reports each app as it is made known, serves (with its functions), moves to a new version and is removed', async () => {
    const own = createAppHost({
      supervisor: createSupervisor({ spawner, log: silentLogger(), output: () => {} }),
      python: PYTHON,
      env: { ...process.env },
      log: silentLogger(),
      settings: { drainDelayMs: 200, readyTimeoutMs: 60_000 },
    });
    const resolver = createLocalResolver({
      projectId: 'local',
      endpoint: (name) => own.endpoint(name),
      replicas: own,
      domains: { appForHost: async () => undefined },
    });
    // The gateway's balancer watches the same host's replicas, as in `apphost dev`.
    const routed = new Map<string, number>();
    resolver.watchReplicas?.({
      setReplicas: (_p, a, list) => routed.set(a, list.length),
      setStartFailure: () => {},
    });
    try {
      const v1 = version('tabled', 'def run():\n    return "v1"\n');
      own.reserve(version('before', 'def run():\n    return "b"\n'));
      const table = new Map<string, ResolvedApp>();
      const removed: string[] = [];
      const stop = resolver.watchApps?.({
        setApp: (a) => table.set(a.appName, a),
        removeApp: (p, a) => {
          expect(p).toBe('local');
          table.delete(a);
          removed.push(a);
        },
      });
      // The snapshot, before watchApps returned: a reserved app, not ready.
      expect(table.get('before')).toMatchObject({ projectId: 'local', appName: 'before', ready: false });

      own.reserve(v1);
      expect(table.get('tabled')).toMatchObject({ ready: false, runtime: 'cortex', gracePeriodSeconds: 5 });
      expect(await own.rollout(v1)).toEqual({ ok: true });
      const port1 = own.endpoint('tabled')?.port;
      expect(table.get('tabled')).toMatchObject({ ready: true, upstream: `http://127.0.0.1:${port1}` });
      // Its functions are listed in the background and reported once known.
      await waitFor('functions reported', async () => table.get('tabled')?.functions?.[0] === 'run', 10_000);
      expect(table.get('tabled')).toEqual(await resolver.resolve('local', 'tabled'));

      const v2 = version('tabled', 'def run():\n    return "v2"\n\ndef extra():\n    return 1\n');
      expect(await own.rollout(v2)).toEqual({ ok: true });
      const port2 = own.endpoint('tabled')?.port;
      expect(port2).not.toBe(port1);
      expect(table.get('tabled')?.upstream).toBe(`http://127.0.0.1:${port2}`);
      await waitFor(
        'new functions reported',
        async () => table.get('tabled')?.functions?.includes('extra') === true,
        10_000,
      );
      expect(routed.get('tabled')).toBe(1);

      expect(await own.remove('tabled')).toBe(true);
      expect(table.has('tabled')).toBe(false);
      expect(removed).toEqual(['tabled']);

      stop?.();
      own.reserve(version('after', 'def run():\n    return "a"\n'));
      expect(table.has('after')).toBe(false);
    } finally {
      await own.stopAll();
    }
  });
});
