/**
 * What async runs ensure in JetStream (configs: src/shared/nats/jetstream.ts): the RUNS stream (the
 * gateway publishes runs, the run worker's consumer reads them) and the run-record bucket (written by
 * the gateway, the run worker and the management API's cancel).
 */
import type { JetStreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import {
  ensureBucket,
  ensureStream,
  runRecordsBucket,
  runsStream,
  syncCallsStream,
} from '../shared/nats/jetstream.ts';
import { type Replicas, SINGLE_REPLICA } from '../shared/nats/replicas.ts';

export async function ensureRunsStream(jsm: JetStreamManager, replicas = SINGLE_REPLICA): Promise<void> {
  await ensureStream(jsm, runsStream(), replicas);
}

export async function ensureRunsBucket(jsm: JetStreamManager, replicas = SINGLE_REPLICA): Promise<KV> {
  return ensureBucket(jsm, runRecordsBucket(), replicas);
}

/** The RUNS stream and the run-record bucket, with `replicas` (one copy when not given); returns the bucket. */
export async function ensureRunsInfrastructure(
  jsm: JetStreamManager,
  replicas: Replicas = SINGLE_REPLICA,
): Promise<KV> {
  await ensureRunsStream(jsm, replicas);
  return ensureRunsBucket(jsm, replicas);
}

/** The SYNC_CALLS stream the gateway records sync calls into (docs/runs.md#sync-calls). */
export async function ensureSyncCallsStream(jsm: JetStreamManager, replicas = SINGLE_REPLICA): Promise<void> {
  await ensureStream(jsm, syncCallsStream(), replicas);
}
