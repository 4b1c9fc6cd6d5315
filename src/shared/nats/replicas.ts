/**
 * How many copies JetStream keeps of our streams and buckets (`APPHOST_NATS_REPLICAS`), and bringing
 * an existing stream to that number. The default follows the cluster: min(3, servers), so a single
 * server keeps R1 and a 3-node cluster gets R3 — which survives the loss of any one server.
 *
 * An existing stream is only ever raised by the default (an upgrade from a single server to a cluster
 * turns R1 into R3 in place: JetStream copies the data to the new peers). Lowering needs an explicit
 * setting, so a server that is briefly missing from the cluster never shrinks a stream.
 */
import type { JetStreamManager } from '@nats-io/jetstream';
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

/** Brings stream `name` (a KV bucket is stream `KV_<bucket>`) to `replicas`; a no-op when it has them. */
export async function ensureStreamReplicas(
  jsm: JetStreamManager,
  name: string,
  replicas: Replicas,
  log?: Logger,
): Promise<void> {
  const info = await jsm.streams.info(name);
  const have = info.config.num_replicas || 1;
  if (have === replicas.count || (have > replicas.count && !replicas.lower)) return;
  await jsm.streams.update(name, { ...info.config, num_replicas: replicas.count });
  log?.info({ stream: name, from: have, to: replicas.count }, 'changed the replicas of a JetStream stream');
}
