/**
 * `apphost fetch-artifacts` (a deployed App's init container) against the real NATS Object Store: it
 * unpacks checked artifacts, and leaves nothing behind for a corrupt or missing one.
 */
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Objm } from '@nats-io/obj';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parseAppConfig } from '../../../src/apis/v1alpha1/app-config.ts';
import { sha256Digest } from '../../../src/builds/archive.ts';
import {
  ARTIFACTS_BUCKET,
  type ArtifactStore,
  openArtifactStore,
} from '../../../src/builds/artifact-store.ts';
import { DEFAULT_BUNDLE_LIMITS, packBundle } from '../../../src/builds/bundle.ts';
import { runFetchArtifactsCommand } from '../../../src/builds/fetch-command.ts';

let nc: NatsConnection;
let store: ArtifactStore;
let root: string;

beforeAll(async () => {
  nc = await connect({ servers: inject('natsUrl') });
  store = await openArtifactStore(nc);
  root = mkdtempSync(join(tmpdir(), 'apphost-fetch-'));
});
afterAll(async () => {
  await nc?.drain();
  rmSync(root, { recursive: true, force: true });
});

async function stored(files: Record<string, string>): Promise<string> {
  const dir = mkdtempSync(join(root, 'src-'));
  for (const [p, t] of Object.entries(files)) {
    mkdirSync(join(dir, p, '..'), { recursive: true });
    writeFileSync(join(dir, p), t);
  }
  const toml = files['apphost.toml'] ?? '[app]\nname = "x"\n';
  const packed = await packBundle(dir, parseAppConfig(toml), DEFAULT_BUNDLE_LIMITS);
  await store.put(packed.digest, packed.data);
  return packed.digest;
}

const run = async (args: string[]) => {
  const out: string[] = [];
  const err: string[] = [];
  try {
    const code = await runFetchArtifactsCommand(
      args,
      { NATS_URL: inject('natsUrl') },
      {
        out: (l) => out.push(l),
        err: (l) => err.push(l),
      },
    );
    return { code, out, err: err.join('\n') };
  } catch (e) {
    return { code: 1, out, err: (e as Error).message };
  }
};

describe('apphost fetch-artifacts', () => {
  it('unpacks the bundle and the dependency set into their folders (emptied first)', async () => {
    const bundle = await stored({
      'apphost.toml': '[app]\nname = "x"\n',
      'main.py': 'def run():\n    return 1\n',
    });
    const deps = await stored({ 'apphost.toml': '[app]\nname = "d"\n', 'lib/__init__.py': 'X = 1\n' });
    const app = join(root, 'app');
    const depsDir = join(root, 'deps');
    mkdirSync(app);
    mkdirSync(depsDir);
    writeFileSync(join(app, 'stale.py'), 'left over from a failed attempt');
    const r = await run([
      '--bundle',
      bundle,
      '--into',
      app,
      '--dependencies',
      deps,
      '--dependencies-into',
      depsDir,
    ]);
    expect(r.code, r.err).toBe(0);
    expect(readdirSync(app).sort()).toEqual(['apphost.toml', 'main.py']);
    expect(readFileSync(join(depsDir, 'lib', '__init__.py'), 'utf8')).toBe('X = 1\n');
    expect(r.out.join('\n')).toMatch(/bundle sha256:[0-9a-f]{64}: 2 files, .* checked/);
  });

  it('a corrupt artifact (bytes that do not hash to its name) fails and leaves the folder empty', async () => {
    const real = await stored({ 'apphost.toml': '[app]\nname = "x"\n', 'main.py': 'print(1)\n' });
    const data = await store.get(real as `sha256:${string}`);
    const claimed = sha256Digest(randomBytes(8));
    await (await new Objm(nc).open(ARTIFACTS_BUCKET)).putBlob({ name: claimed }, data);
    const dir = join(root, 'corrupt');
    mkdirSync(dir);
    const r = await run(['--bundle', claimed, '--into', dir]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/corrupt/);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('a missing artifact fails with its digest named', async () => {
    const digest = sha256Digest(randomBytes(8));
    const dir = join(root, 'missing');
    mkdirSync(dir);
    const r = await run(['--bundle', digest, '--into', dir]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`${digest} is not in the store`);
    expect(existsSync(join(dir, 'main.py'))).toBe(false);
  });

  it('refuses a digest that is not sha256:<hex>', async () => {
    const r = await run(['--bundle', 'md5:abc', '--into', root]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/--bundle must be sha256/);
  });
});

describe('apphost fetch-artifacts --file', () => {
  it('writes a plain artifact (a build’s requirements) to a file, checked', async () => {
    const { sha256Digest: digestOf } = await import('../../../src/builds/archive.ts');
    const text = Buffer.from('greetlib==1.0.0\n');
    const d = digestOf(text);
    await store.put(d, text);
    const bundle = await stored({ 'apphost.toml': '[app]\nname = "x"\n', 'main.py': 'print(1)\n' });
    const out = join(root, 'with-file');
    mkdirSync(out);
    const r = await run(['--bundle', bundle, '--into', out, '--file', `${d}:${join(out, 'reqs.txt')}`]);
    expect(r.code, r.err).toBe(0);
    expect(readFileSync(join(out, 'reqs.txt'), 'utf8')).toBe('greetlib==1.0.0\n');
  });
});
