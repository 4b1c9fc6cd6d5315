/**
 * `NATS_URL` may name several servers of one cluster, comma-separated
 * (`nats://n1:4222,nats://n2:4222,nats://n3:4222`), as the NATS CLI and other clients accept it. The
 * client starts with whichever answers and learns the rest of the cluster from it.
 */
/**
 * How often a client pings its server, and how many pings may go unanswered. A server that hangs
 * (rather than dies, which the socket shows at once) is left for another within about
 * interval × (maxPingOut + 1) = 15 s — well inside the run worker's 30 s ack wait, so the runs a worker
 * holds are not handed to a second worker while it cannot reach JetStream. (The client default is 2 min.)
 */
export const NATS_PING_INTERVAL_MS = 5_000;
export const NATS_MAX_PINGS_OUT = 2;

/**
 * The connection options every piece uses for `NATS_URL`. `noAsyncTraces`: the client otherwise builds
 * two Error objects (stack traces) for every request — every JetStream publish, KV write and ack with
 * a reply — in case it fails; in profiles that was a fifth of the run worker's CPU and a tenth of the
 * gateway's on the 202 path (docs/benchmarks.md). Failures keep their types and messages.
 */
export function natsClientOptions(url: string): {
  servers: string[];
  pingInterval: number;
  maxPingOut: number;
  noAsyncTraces: boolean;
} {
  return {
    servers: natsServers(url),
    pingInterval: NATS_PING_INTERVAL_MS,
    maxPingOut: NATS_MAX_PINGS_OUT,
    noAsyncTraces: true,
  };
}

export function natsServers(url: string): string[] {
  const servers = url
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (servers.length === 0) throw new Error('NATS_URL names no server');
  return servers;
}
