/**
 * How many copies JetStream keeps of our streams and buckets (`APPHOST_NATS_REPLICAS`), and bringing
 * an existing stream to that number. The default follows the cluster: min(3, servers), so a single
 * server keeps R1 and a 3-node cluster gets R3 — which survives the loss of any one server.
 *
 * An existing stream is only ever raised by the default (an upgrade from a single server to a cluster
 * turns R1 into R3 in place: JetStream copies the data to the new peers). Lowering needs an explicit
 * setting, so a server that is briefly missing from the cluster never shrinks a stream.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { JetStreamManager, StreamInfo } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import type { Logger } from '../log.ts';

/** JetStream's own limit. */
export const MAX_REPLICAS = 5;
export const DEFAULT_MAX_AUTO_REPLICAS = 3;

/** `auto` (min(3, cluster size)) or a fixed count 1..5. */
export type ReplicasSetting = 'auto' | number;

export function parseReplicasSetting(raw: string | undefined): ReplicasSetting {
  if (raw === undefined || raw.trim() === '' || raw.trim() === 'auto') return 'auto';
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > MAX_REPLICAS)
    throw new Error(
      `APPHOST_NATS_REPLICAS must be "auto" or a whole number 1..${MAX_REPLICAS}, got "${raw}"`,
    );
  return n;
}

/** The `APPHOST_NATS_REPLICAS` setting in a piece's env schema (src/shared/settings.ts). */
export const natsReplicas = () =>
  z
    .string()
    .optional()
    .transform((v, ctx): ReplicasSetting => {
      try {
        return parseReplicasSetting(v);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    });

/** Servers in the cluster `nc` is connected to: the client URLs it advertises (none when standalone). */
export function clusterSize(nc: Pick<NatsConnection, 'info'>): number {
  return Math.max(1, nc.info?.connect_urls?.length ?? 0);
}

export interface Replicas {
  /** The count new streams and buckets are created with. */
  count: number;
  /** Whether an existing stream with more replicas is lowered to `count` (explicit setting only). */
  lower: boolean;
}

/** What callers that were not told otherwise use: create with one copy, never change an existing stream. */
export const SINGLE_REPLICA: Replicas = { count: 1, lower: false };

export function resolveReplicas(setting: ReplicasSetting, nc: Pick<NatsConnection, 'info'>): Replicas {
  if (setting === 'auto')
    return { count: Math.min(DEFAULT_MAX_AUTO_REPLICAS, clusterSize(nc)), lower: false };
  return { count: setting, lower: true };
}

/**
 * Bound on waiting for a stream whose replicas changed to have a leader and every copy caught up.
 * Reads right after a change can otherwise meet a stream still electing its leader.
 */
export const STREAM_CATCH_UP_MS = 30_000;
const CATCH_UP_POLL_MS = 200;

/** Whether every replica JetStream lists for the stream is current, under an elected leader. */
export function replicasCaughtUp(info: Pick<StreamInfo, 'cluster' | 'config'>, want: number): boolean {
  if (want <= 1) return true;
  const cluster = info.cluster;
  if (!cluster?.leader) return false;
  const peers = cluster.replicas ?? [];
  return peers.length === want - 1 && peers.every((p) => p.current);
}

/**
 * Brings stream `name` (a KV bucket is stream `KV_<bucket>`) to `replicas`; a no-op when it has them.
 * After a change it waits, up to `catchUpMs`, for the new copies to be current, so the stream serves
 * reads when this returns; past the bound it logs and returns (the leader still serves).
 */
export async function ensureStreamReplicas(
  jsm: JetStreamManager,
  name: string,
  replicas: Replicas,
  log?: Logger,
  catchUpMs = STREAM_CATCH_UP_MS,
): Promise<void> {
  const info = await jsm.streams.info(name);
  const have = info.config.num_replicas || 1;
  if (have === replicas.count || (have > replicas.count && !replicas.lower)) return;
  await jsm.streams.update(name, { ...info.config, num_replicas: replicas.count });
  log?.info({ stream: name, from: have, to: replicas.count }, 'changed the replicas of a JetStream stream');
  const deadline = Date.now() + catchUpMs;
  for (;;) {
    const now = await jsm.streams.info(name).catch(() => undefined);
    if (now && replicasCaughtUp(now, replicas.count)) return;
    if (Date.now() >= deadline) {
      log?.warn(
        { stream: name, replicas: replicas.count, boundMs: catchUpMs },
        'the new replicas of a JetStream stream are not caught up yet; going on',
      );
      return;
    }
    await sleep(CATCH_UP_POLL_MS);
  }
}
