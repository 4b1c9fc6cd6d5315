/**
 * The artifact store: bundles and built dependency sets in a NATS JetStream Object Store bucket, each
 * object named by its sha256 digest, so equal content is stored once and anyone holding a digest can
 * check what they fetched. A KV bucket maps a dependency key (requirements.ts) to the set it built.
 */
import { createHash } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import { type ObjectStore, Objm } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Sha256Digest } from '../apis/v1alpha1/types.ts';
import { ARTIFACTS_BUCKET, DEPENDENCY_SETS_BUCKET } from '../shared/contracts/builds.ts';
import { artifactsObjectStore, dependencySetsBucket, ensureBucket } from '../shared/nats/jetstream.ts';
import { isSha256Digest, sha256Digest } from './archive.ts';

export { ARTIFACTS_BUCKET, DEPENDENCY_SETS_BUCKET };

export const ArtifactFailure = { Missing: 'missing', Corrupt: 'corrupt' } as const;

/** An artifact that is absent, or whose bytes do not hash to its name. */
export class ArtifactError extends Error {
  override readonly name = 'ArtifactError';
  readonly failure: (typeof ArtifactFailure)[keyof typeof ArtifactFailure];
  readonly digest: string;
  constructor(failure: ArtifactError['failure'], digest: string, message: string) {
    super(message);
    this.failure = failure;
    this.digest = digest;
  }
}

export interface ArtifactStore {
  has(digest: Sha256Digest): Promise<boolean>;
  /** Stores `data` under `digest` after checking that it hashes to it; a no-op when it is there already. */
  put(digest: Sha256Digest, data: Uint8Array): Promise<void>;
  /** The whole artifact, checked against its digest. */
  get(digest: Sha256Digest): Promise<Buffer>;
  /**
   * The artifact as a stream of chunks; the stream fails at its end (after the last chunk) when the bytes
   * do not hash to the digest, so a consumer must treat what it wrote as untrusted until the end.
   */
  stream(digest: Sha256Digest): Promise<AsyncIterable<Uint8Array>>;
  /** The dependency set built for a key, if any. */
  dependencySet(key: string): Promise<Sha256Digest | undefined>;
  recordDependencySet(key: string, digest: Sha256Digest): Promise<void>;
}

/** Opens (creating if needed) both buckets, on one server (tests); processes use ensureBuildInfrastructure. */
export async function openArtifactStore(nc: NatsConnection): Promise<ArtifactStore> {
  const jsm = await jetstreamManager(nc);
  const os = await new Objm(nc).create(artifactsObjectStore().name, artifactsObjectStore());
  return createArtifactStore(os, await ensureBucket(jsm, dependencySetsBucket()));
}

/**
 * Opens the artifacts bucket without creating anything (what an app pod's init container does: it only
 * reads). The dependency-set index is not available through it.
 */
export async function openArtifactStoreForReading(nc: NatsConnection): Promise<ArtifactStore> {
  return createArtifactStore(await new Objm(nc).open(ARTIFACTS_BUCKET), undefined);
}

/** Opens both buckets without creating anything (a build Job's publish step: the platform created them). */
export async function openExistingArtifactStore(nc: NatsConnection): Promise<ArtifactStore> {
  return createArtifactStore(
    await new Objm(nc).open(ARTIFACTS_BUCKET),
    await new Kvm(nc).open(DEPENDENCY_SETS_BUCKET),
  );
}

export function createArtifactStore(os: ObjectStore, kv: KV | undefined): ArtifactStore {
  const index = () => {
    if (!kv) throw new Error('the dependency-set index is not open here');
    return kv;
  };
  const check = (digest: string) => {
    if (!isSha256Digest(digest)) throw new Error(`not a sha256 digest: ${digest}`);
  };
  const present = async (digest: Sha256Digest) => {
    const info = await os.info(digest);
    return info !== null && !info.deleted;
  };

  const stream = async (digest: Sha256Digest): Promise<AsyncIterable<Uint8Array>> => {
    check(digest);
    const result = await os.get(digest);
    if (!result || result.info.deleted)
      throw new ArtifactError(ArtifactFailure.Missing, digest, `artifact ${digest} is not in the store`);
    return (async function* () {
      const hash = createHash('sha256');
      for await (const chunk of result.data as unknown as AsyncIterable<Uint8Array>) {
        hash.update(chunk);
        yield chunk;
      }
      const err = await result.error;
      const got = `sha256:${hash.digest('hex')}`;
      if (err || got !== digest)
        throw new ArtifactError(
          ArtifactFailure.Corrupt,
          digest,
          `artifact ${digest} is corrupt (its bytes hash to ${got}${err ? `; ${err.message}` : ''})`,
        );
    })();
  };

  return {
    has: async (digest) => {
      check(digest);
      return present(digest);
    },
    async put(digest, data) {
      check(digest);
      const actual = sha256Digest(data);
      if (actual !== digest) throw new Error(`refusing to store ${actual} under the name ${digest}`);
      if (await present(digest)) return;
      await os.putBlob({ name: digest }, data);
    },
    async get(digest) {
      const chunks: Uint8Array[] = [];
      for await (const c of await stream(digest)) chunks.push(c);
      return Buffer.concat(chunks);
    },
    stream,
    async dependencySet(key) {
      const e = await index().get(depKey(key));
      if (e?.operation !== 'PUT') return undefined;
      const digest = e.string();
      return isSha256Digest(digest) && (await present(digest)) ? digest : undefined;
    },
    async recordDependencySet(key, digest) {
      check(digest);
      await index().put(depKey(key), digest);
    },
  };
}

const depKey = (key: string) => {
  if (!/^[0-9a-f]{64}$/.test(key)) throw new Error(`not a dependency key: ${key}`);
  return `deps.${key}`;
};
