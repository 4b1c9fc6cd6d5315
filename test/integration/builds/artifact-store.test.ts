/** The artifact store on a real NATS JetStream Object Store. */
import { randomBytes } from 'node:crypto';
import { Objm } from '@nats-io/obj';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sha256Digest } from '../../../src/builds/archive.ts';
import {
  ARTIFACTS_BUCKET,
  ArtifactError,
  type ArtifactStore,
  openArtifactStore,
} from '../../../src/builds/artifact-store.ts';

let nc: NatsConnection;
let store: ArtifactStore;

beforeAll(async () => {
  nc = await connect({ servers: inject('natsUrl') });
  store = await openArtifactStore(nc);
});
afterAll(async () => {
  await nc?.drain();
});

describe('artifact store (NATS Object Store)', () => {
  it('stores by sha256, once, and gives back the same bytes (larger than one chunk)', async () => {
    const data = randomBytes(700_000);
    const digest = sha256Digest(data);
    expect(await store.has(digest)).toBe(false);
    await store.put(digest, data);
    await store.put(digest, data);
    expect(await store.has(digest)).toBe(true);
    expect((await store.get(digest)).equals(data)).toBe(true);
    const info = await (await new Objm(nc).open(ARTIFACTS_BUCKET)).info(digest);
    expect(info?.size).toBe(data.length);
    expect(info?.revision).toBeGreaterThan(0);
  });

  it('refuses to store bytes under a name that is not their digest', async () => {
    const data = randomBytes(100);
    await expect(store.put(sha256Digest(randomBytes(100)), data)).rejects.toThrow(/refusing to store/);
  });

  it('a missing artifact is ArtifactError missing', async () => {
    const digest = sha256Digest(randomBytes(10));
    await expect(store.get(digest)).rejects.toMatchObject({ name: 'ArtifactError', failure: 'missing' });
  });

  it('an object whose bytes do not hash to its name fails at the end of the stream (corrupt)', async () => {
    const claimed = sha256Digest(randomBytes(16));
    const os = await new Objm(nc).open(ARTIFACTS_BUCKET);
    await os.putBlob({ name: claimed }, randomBytes(300_000));
    const chunks: Uint8Array[] = [];
    const err = await (async () => {
      try {
        for await (const c of await store.stream(claimed)) chunks.push(c);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ArtifactError);
    expect((err as ArtifactError).failure).toBe('corrupt');
    expect(chunks.length).toBeGreaterThan(0);
  });

  it('remembers the dependency set built for a key, only while the set is stored', async () => {
    const key = randomBytes(32).toString('hex');
    expect(await store.dependencySet(key)).toBeUndefined();
    const data = randomBytes(1000);
    const digest = sha256Digest(data);
    await store.put(digest, data);
    await store.recordDependencySet(key, digest);
    expect(await store.dependencySet(key)).toBe(digest);
    const gone = sha256Digest(randomBytes(5));
    const key2 = randomBytes(32).toString('hex');
    await store.recordDependencySet(key2, gone);
    expect(await store.dependencySet(key2)).toBeUndefined();
  });
});
