/**
 * The local dependency build: real pip of the runtime's venv, a wheel made here and installed from a
 * folder inside the bundle (no network), the result in the real NATS Object Store.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parseAppConfig } from '../../../src/apis/v1alpha1/app-config.ts';
import { type ArtifactStore, openArtifactStore } from '../../../src/builds/artifact-store.ts';
import type { DependencyBuilder } from '../../../src/builds/builder.ts';
import { DEFAULT_BUNDLE_LIMITS, inspectBundle, packBundle } from '../../../src/builds/bundle.ts';
import { createLocalBuilder, materialize } from '../../../src/builds/local-builder.ts';
import { dependencyKey } from '../../../src/builds/requirements.ts';
import { makeWheel } from '../../harness/wheel.ts';
import { PYTHON } from '../gateway/helpers.ts';

let nc: NatsConnection;
let store: ArtifactStore;
let builder: DependencyBuilder;
let root: string;
const env = { ...process.env, PIP_NO_INDEX: '1', PIP_CONFIG_FILE: '/dev/null' };

beforeAll(async () => {
  nc = await connect({ servers: inject('natsUrl') });
  store = await openArtifactStore(nc);
  root = mkdtempSync(join(tmpdir(), 'apphost-localbuild-'));
  builder = createLocalBuilder({
    python: PYTHON,
    store,
    workDir: join(root, 'work'),
    cacheDir: join(root, 'cache'),
    env,
  });
});
afterAll(async () => {
  await nc?.drain();
  if (root) rmSync(root, { recursive: true, force: true });
});

/** An app folder with the given requirements.txt and wheels; packed, stored, inspected. */
async function app(requirements: string, wheels: Array<[string, string, string]>) {
  const dir = mkdtempSync(join(root, 'app-'));
  const toml = '[app]\nname = "deps-app"\n';
  writeFileSync(join(dir, 'apphost.toml'), toml);
  writeFileSync(join(dir, 'main.py'), 'import greetlib\n\ndef run():\n    return greetlib.hello()\n');
  writeFileSync(join(dir, 'requirements.txt'), requirements);
  mkdirSync(join(dir, 'wheels'));
  for (const [name, version, source] of wheels) makeWheel(PYTHON, join(dir, 'wheels'), name, version, source);
  const packed = await packBundle(dir, parseAppConfig(toml), DEFAULT_BUNDLE_LIMITS);
  await store.put(packed.digest, packed.data);
  const inspected = await inspectBundle(packed.data, DEFAULT_BUNDLE_LIMITS);
  const key = dependencyKey(await builder.target(), inspected.requirements, inspected.fileDigests);
  return {
    buildId: `b${Math.random().toString(36).slice(2, 10)}`,
    projectId: 'p',
    appName: 'deps-app',
    bundle: packed.digest,
    requirements: inspected.requirements,
    requirementsDir: '',
    key,
  };
}

describe('local dependency build (pip --target in a subprocess)', () => {
  it('installs a wheel from the bundle; the set is stored by sha256, recorded under its key and importable', async () => {
    const req = await app('-f wheels\ngreetlib==0.1.0\n', [
      ['greetlib', '0.1.0', 'def hello():\n    return "hi from greetlib"\n'],
    ]);
    const log: string[] = [];
    const r = await builder.build(req, (l) => log.push(l), new AbortController().signal);
    expect(r, log.join('\n')).toMatchObject({ ok: true });
    if (!r.ok) return;
    expect(r.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(await store.has(r.digest)).toBe(true);
    expect(await store.dependencySet(req.key)).toBe(r.digest);
    expect(log.join('\n')).toMatch(/Successfully installed greetlib-0\.1\.0/);
    // A fresh cache folder gets the set from the store, verified.
    const dir = await materialize(store, r.digest, join(root, 'other-cache'));
    const probe = spawnSync(
      PYTHON,
      ['-c', 'import sys; sys.path.insert(0, sys.argv[1]); import greetlib; print(greetlib.hello())', dir],
      {
        encoding: 'utf8',
        timeout: 30_000,
      },
    );
    expect(probe.stdout.trim()).toBe('hi from greetlib');
  });

  it("reports pip's own error when a requirement cannot be installed", async () => {
    const req = await app('-f wheels\nno-such-package==1.0\n', []);
    const log: string[] = [];
    const r = await builder.build(req, (l) => log.push(l), new AbortController().signal);
    expect(r).toMatchObject({ ok: false, failure: 'pip_failed' });
    if (r.ok) return;
    expect(r.message).toMatch(/ERROR: (Could not find a version|No matching distribution).*no-such-package/);
  });

  it("refuses a requirement that would replace a package the runtime runs on (the runtime's constraints)", async () => {
    // h11 is pinned by the runtime (uvicorn's dependency); offer an older one.
    const req = await app('-f wheels\nh11==0.14.0\n', [['h11', '0.14.0', '']]);
    const r = await builder.build(req, () => {}, new AbortController().signal);
    expect(r).toMatchObject({ ok: false, failure: 'pip_failed' });
    if (r.ok) return;
    expect(r.message).toMatch(/h11/);
    expect(r.message).toMatch(/Cannot install h11==0.14.0/);
    expect(r.message).toMatch(/\(constraint\) h11==0.16.0/);
  });
});
