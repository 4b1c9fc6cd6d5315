/**
 * The deploy pipeline of apphost dev on real parts (NATS, pip, the Python runtime): a failed build or
 * a version that cannot start never replaces the one that serves; dependency sets are reused by key;
 * the newest deploy of an app wins.
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parseAppConfig } from '../../../src/apis/v1alpha1/app-config.ts';
import { DEFAULT_BUNDLE_LIMITS, packBundle } from '../../../src/builds/bundle.ts';
import { type LocalDeploys, startLocalDeploys } from '../../../src/local/deploys.ts';
import { nodeSpawner, trackingSpawner } from '../../../src/local/spawner.ts';
import { createSupervisor } from '../../../src/local/supervisor.ts';
import type { BuildRecord } from '../../../src/shared/contracts/builds.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { makeWheel } from '../../harness/wheel.ts';
import { PYTHON } from '../gateway/helpers.ts';

const PROJECT = `deploys${Date.now().toString(36)}`;
let root: string;
let deploys: LocalDeploys;
const spawner = trackingSpawner(nodeSpawner);
let lib: string[] = [];
const supervisor = createSupervisor({ spawner, log: silentLogger(), output: () => {} });
const added: string[] = [];

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'apphost-deploys-'));
  lib = [
    makeWheel(PYTHON, join(root, 'wheels'), 'greetlib', '0.1.0', 'def hello():\n    return "from the lib"\n'),
  ];
  deploys = await startLocalDeploys({
    natsUrl: inject('natsUrl'),
    projectId: PROJECT,
    python: PYTHON,
    env: { ...process.env, PIP_NO_INDEX: '1', PIP_CONFIG_FILE: '/dev/null' },
    stateDir: join(root, 'state'),
    supervisor,
    log: silentLogger(),
    output: () => {},
    onAppAdded: (n) => added.push(n),
    onAppRemoved: () => {},
  });
});
afterAll(async () => {
  await deploys?.stop();
  await supervisor.stopAll();
  spawner.killAll();
  rmSync(root, { recursive: true, force: true });
});

/** Bundles a folder with these files and deploys it; waits for the build to end. */
async function deploy(files: Record<string, string>, wheels: string[] = []): Promise<BuildRecord> {
  const dir = mkdtempSync(join(root, 'src-'));
  for (const [path, text] of Object.entries(files)) writeFileSync(join(dir, path), text);
  if (wheels.length) mkdirSync(join(dir, 'wheels'));
  for (const w of wheels) copyFileSync(w, join(dir, 'wheels', basename(w)));
  const config = parseAppConfig(files['apphost.toml'] ?? '');
  const packed = await packBundle(dir, config, DEFAULT_BUNDLE_LIMITS);
  const queued = await deploys.deployments.submit(PROJECT, packed.data);
  const [done] = await deploys.settle([queued], 120_000);
  return done as BuildRecord;
}

async function call(app: string): Promise<unknown> {
  const ep = deploys.host.endpoint(app);
  const res = await fetch(`http://127.0.0.1:${ep?.port}/run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
    signal: AbortSignal.timeout(10_000),
  });
  expect(res.status).toBe(200);
  return res.json();
}

const TOML = '[app]\nname = "shop"\n';
const WITH_LIB = 'import greetlib\n\ndef run():\n    return greetlib.hello()\n';
const LIB_REQS = '-f wheels\ngreetlib==0.1.0\n';

describe('local deploys', () => {
  it('a first deploy builds nothing without requirements and serves', async () => {
    const r = await deploy({ 'apphost.toml': TOML, 'main.py': 'def run():\n    return "v1"\n' });
    expect(r).toMatchObject({ state: 'ready', appName: 'shop', attempts: 1 });
    expect(r.dependencies).toBeUndefined();
    expect(await call('shop')).toBe('v1');
    expect(added).toContain('shop');
    const log = await deploys.logs.read(PROJECT, 'shop', r.buildId);
    expect(log.complete).toBe(true);
    expect(log.lines.map((l) => l.text)).toContain(`ready: shop serves build ${r.buildId}`);
  });

  it('a deploy with requirements gets its own dependency set', async () => {
    const r = await deploy({ 'apphost.toml': TOML, 'main.py': WITH_LIB, 'requirements.txt': LIB_REQS }, lib);
    expect(r).toMatchObject({ state: 'ready', dependenciesCached: false });
    expect(r.dependencies).toMatch(/^sha256:/);
    expect(await call('shop')).toBe('from the lib');
  });

  it('the same requirements and wheels again reuse the set (no pip run)', async () => {
    const r = await deploy(
      { 'apphost.toml': TOML, 'main.py': `${WITH_LIB}# a code change\n`, 'requirements.txt': LIB_REQS },
      lib,
    );
    expect(r).toMatchObject({ state: 'ready', dependenciesCached: true });
    const log = (await deploys.logs.read(PROJECT, 'shop', r.buildId)).lines.map((l) => l.text).join('\n');
    expect(log).toMatch(/reusing the set built before/);
    expect(log).not.toMatch(/pip install/);
  });

  it("a failed build reports pip's error and the version that served keeps serving", async () => {
    const r = await deploy({
      'apphost.toml': TOML,
      'main.py': WITH_LIB,
      'requirements.txt': '-f wheels\nno-such-lib==9\n',
    });
    expect(r.state).toBe('failed');
    expect(r.error?.code).toBe('pip_failed');
    expect(r.error?.message).toMatch(/ERROR: .*no-such-lib/);
    expect(await call('shop')).toBe('from the lib');
    const log = (await deploys.logs.read(PROJECT, 'shop', r.buildId)).lines.map((l) => l.text).join('\n');
    expect(log).toMatch(/ERROR: .*no-such-lib/);
    expect(log).toMatch(/the version that served before keeps serving/);
  });

  it('a version that cannot start is rolled back with its traceback; the old one keeps serving', async () => {
    const r = await deploy({ 'apphost.toml': TOML, 'main.py': 'raise RuntimeError("boom at import")\n' });
    expect(r).toMatchObject({ state: 'failed', rolledBack: true });
    expect(r.error?.code).toBe('rollout_failed');
    expect(r.error?.message).toMatch(/RuntimeError: boom at import/);
    expect(await call('shop')).toBe('from the lib');
  });

  it('the newest deploy wins over an older one that was still queued', async () => {
    const dir = (text: string) => {
      const d = mkdtempSync(join(root, 'race-'));
      writeFileSync(join(d, 'apphost.toml'), TOML);
      writeFileSync(join(d, 'main.py'), `def run():\n    return "${text}"\n`);
      return d;
    };
    const config = parseAppConfig(TOML);
    const a = await packBundle(dir('older'), config, DEFAULT_BUNDLE_LIMITS);
    const b = await packBundle(dir('newer'), config, DEFAULT_BUNDLE_LIMITS);
    const older = await deploys.deployments.submit(PROJECT, a.data);
    const newer = await deploys.deployments.submit(PROJECT, b.data);
    const [o, n] = await deploys.settle([older, newer], 120_000);
    expect(n?.state).toBe('ready');
    expect(await call('shop')).toBe('newer');
    // The older one either finished before the newer came in, or was not applied.
    if (o?.state === 'failed') expect(o.error?.code).toBe('superseded');
  });
});
