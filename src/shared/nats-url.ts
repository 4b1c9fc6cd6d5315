/**
 * `NATS_URL` may name several servers of one cluster, comma-separated
 * (`nats://n1:4222,nats://n2:4222,nats://n3:4222`), as the NATS CLI and other clients accept it. The
 * client starts with whichever answers and learns the rest of the cluster from it.
 */
export function natsServers(url: string): string[] {
  const servers = url
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (servers.length === 0) throw new Error('NATS_URL names no server');
  return servers;
}
