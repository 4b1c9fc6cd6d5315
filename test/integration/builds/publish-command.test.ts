/**
 * `apphost publish-dependencies` (the last step of a cluster build Job) against the real NATS Object
 * Store: the folder pip installed into is stored by sha256 and recorded under its dependency key, and
 * an App pod's init container (`apphost fetch-artifacts`) gets the same files back.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type ArtifactStore, openArtifactStore } from '../../../src/builds/artifact-store.ts';
import { runFetchArtifactsCommand } from '../../../src/builds/fetch-command.ts';
import { runPublishDependenciesCommand } from '../../../src/builds/publish-command.ts';

let nc: NatsConnection;
let store: ArtifactStore;
let root: string;

beforeAll(async () => {
  nc = await connect({ servers: inject('natsUrl') });
  store = await openArtifactStore(nc);
  root = mkdtempSync(join(tmpdir(), 'apphost-publish-'));
});
afterAll(async () => {
  await nc?.drain();
  rmSync(root, { recursive: true, force: true });
});

async function publish(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  try {
    const code = await runPublishDependenciesCommand(
      args,
      { NATS_URL: inject('natsUrl') },
      { out: (l) => out.push(l), err: (l) => err.push(l) },
    );
    return { code, out: out.join('\n'), err: err.join('\n') };
  } catch (e) {
    return { code: 2, out: out.join('\n'), err: (e as Error).message };
  }
}

describe('apphost publish-dependencies', () => {
  it('stores the folder by sha256 under the key; the init container fetches the same files', async () => {
    const deps = join(root, 'deps');
    mkdirSync(join(deps, 'greetlib'), { recursive: true });
    writeFileSync(join(deps, 'greetlib', '__init__.py'), 'def greet(n):\n    return n\n');
    writeFileSync(join(deps, 'greetlib-1.0.0.dist-info'), 'x');
    const key = randomBytes(32).toString('hex');
    expect(await store.dependencySet(key)).toBeUndefined();

    const r = await publish(['--dir', deps, '--key', key]);
    expect(r.code, r.err).toBe(0);
    const digest = await store.dependencySet(key);
    expect(digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(r.out).toContain(`dependency set ${digest}: 2 files`);

    const bundleDir = join(root, 'app');
    mkdirSync(join(root, 'bundle-src'));
    writeFileSync(join(root, 'bundle-src', 'apphost.toml'), '[app]\nname = "x"\n');
    const { packBundle, DEFAULT_BUNDLE_LIMITS } = await import('../../../src/builds/bundle.ts');
    const { parseAppConfig } = await import('../../../src/apis/v1alpha1/app-config.ts');
    writeFileSync(join(root, 'bundle-src', 'main.py'), 'def run():\n    return 1\n');
    const packed = await packBundle(
      join(root, 'bundle-src'),
      parseAppConfig('[app]\nname = "x"\n'),
      DEFAULT_BUNDLE_LIMITS,
    );
    await store.put(packed.digest, packed.data);
    const into = join(root, 'fetched-deps');
    mkdirSync(bundleDir);
    mkdirSync(into);
    const code = await runFetchArtifactsCommand(
      [
        '--bundle',
        packed.digest,
        '--into',
        bundleDir,
        '--dependencies',
        digest ?? '',
        '--dependencies-into',
        into,
      ],
      { NATS_URL: inject('natsUrl') },
      { out: () => {}, err: () => {} },
    );
    expect(code).toBe(0);
    expect(readFileSync(join(into, 'greetlib', '__init__.py'), 'utf8')).toBe('def greet(n):\n    return n\n');
  });

  it('refuses a key that is not 64 hex digits', async () => {
    const r = await publish(['--dir', join(root, 'deps'), '--key', 'not-a-key']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--key must be 64 lowercase hex digits/);
  });
});
