/**
 * What deploys need in JetStream, ensured by whoever writes it (src/shared/nats/jetstream.ts states
 * every config): the BUILDS work queue, the BUILD_LOGS stream, the build-record and dependency-set
 * buckets and the artifacts Object Store.
 */
import type { JetStreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { Objm } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../shared/log.ts';
import {
  artifactsObjectStore,
  buildLogsStream,
  buildsBucket,
  buildsStream,
  dependencySetsBucket,
  ensureBucket,
  ensureStream,
  type Replicas,
} from '../shared/nats/jetstream.ts';
import { ensureStreamReplicas, SINGLE_REPLICA } from '../shared/nats/replicas.ts';
import { type ArtifactStore, createArtifactStore } from './artifact-store.ts';

export interface BuildInfrastructure {
  kv: KV;
  artifacts: ArtifactStore;
}

export async function ensureBuildInfrastructure(
  nc: NatsConnection,
  jsm: JetStreamManager,
  replicas: Replicas = SINGLE_REPLICA,
  log?: Logger,
): Promise<BuildInfrastructure> {
  await ensureStream(jsm, buildsStream(), replicas, log);
  await ensureStream(jsm, buildLogsStream(), replicas, log);
  const kv = await ensureBucket(jsm, buildsBucket(), replicas, log);
  const deps = await ensureBucket(jsm, dependencySetsBucket(), replicas, log);
  const { name, ...opts } = artifactsObjectStore();
  const os = await new Objm(nc).create(name, { ...opts, replicas: replicas.count });
  await ensureStreamReplicas(jsm, `OBJ_${name}`, replicas, log);
  return { kv, artifacts: createArtifactStore(os, deps) };
}
