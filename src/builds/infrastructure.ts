/**
 * What deploys need in JetStream, created idempotently by every management API / apphost dev start:
 * the BUILDS work queue, the BUILD_LOGS stream, the build-record bucket and the artifact store.
 */
import {
  DiscardPolicy,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { BUILD_LOGS_STREAM, BUILDS_BUCKET, BUILDS_STREAM } from '../shared/contracts/builds.ts';
import { type ArtifactStore, type ArtifactStoreSettings, openArtifactStore } from './artifact-store.ts';

export interface BuildInfrastructureSettings extends ArtifactStoreSettings {
  /** How long build records and logs are kept. */
  retentionMs: number;
  /** Lines kept per build log (the oldest go first). */
  maxLogLines: number;
}

export const DEFAULT_BUILD_INFRASTRUCTURE_SETTINGS: BuildInfrastructureSettings = {
  replicas: 1,
  maxBytes: -1,
  retentionMs: 30 * 24 * 3600_000,
  maxLogLines: 20_000,
};

/** A re-published build job with the same `Nats-Msg-Id` (build id) within this window is dropped. */
export const BUILDS_DUPLICATE_WINDOW_MS = 10 * 60_000;

const nanos = (ms: number) => ms * 1_000_000;

async function ensureStream(
  jsm: JetStreamManager,
  name: string,
  config: Partial<StreamConfig>,
): Promise<void> {
  try {
    await jsm.streams.info(name);
    await jsm.streams.update(name, config);
  } catch (err) {
    if (
      !/stream not found/i.test(String((err as Error)?.message)) &&
      (err as { name?: string })?.name !== 'StreamNotFoundError'
    )
      throw err;
    try {
      await jsm.streams.add({ name, ...config });
    } catch (addErr) {
      // Another replica created it between our info and add.
      await jsm.streams.info(name).catch(() => {
        throw addErr;
      });
    }
  }
}

export interface BuildInfrastructure {
  kv: KV;
  artifacts: ArtifactStore;
}

export async function ensureBuildInfrastructure(
  nc: NatsConnection,
  jsm: JetStreamManager,
  settings: Partial<BuildInfrastructureSettings> = {},
): Promise<BuildInfrastructure> {
  const s = { ...DEFAULT_BUILD_INFRASTRUCTURE_SETTINGS, ...settings };
  await ensureStream(jsm, BUILDS_STREAM, {
    subjects: ['apphost.builds.>'],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    num_replicas: s.replicas,
    duplicate_window: nanos(BUILDS_DUPLICATE_WINDOW_MS),
    max_msg_size: 64 * 1024,
  });
  await ensureStream(jsm, BUILD_LOGS_STREAM, {
    subjects: ['apphost.buildlogs.>'],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    num_replicas: s.replicas,
    max_age: nanos(s.retentionMs),
    max_msgs_per_subject: s.maxLogLines,
    discard: DiscardPolicy.Old,
    max_msg_size: 16 * 1024,
  });
  const kv = await new Kvm(nc).create(BUILDS_BUCKET, {
    history: 1,
    ttl: s.retentionMs,
    storage: StorageType.File,
    replicas: s.replicas,
  });
  const artifacts = await openArtifactStore(nc, { replicas: s.replicas, maxBytes: s.maxBytes });
  return { kv, artifacts };
}
