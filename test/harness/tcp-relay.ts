/**
 * A TCP relay in front of a real server, to produce a network fault no real server produces on
 * demand: `freeze()` makes every open connection go silent without closing (a dead NAT entry or a
 * peer that vanished), while new connections still get through.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface TcpRelay {
  /** The relay's `host:port`. */
  readonly address: string;
  /** Open connections stop carrying bytes in both directions; they are never closed. */
  freeze(): void;
  /** Connections frozen so far. */
  frozen(): number;
  close(): Promise<void>;
}

export async function startTcpRelay(target: { host: string; port: number }): Promise<TcpRelay> {
  const open = new Set<[Socket, Socket]>();
  const held: Array<[Socket, Socket]> = [];
  const server: Server = createServer((client) => {
    const upstream = createConnection(target);
    const pair: [Socket, Socket] = [client, upstream];
    open.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    address: `127.0.0.1:${port}`,
    freeze() {
      for (const pair of open) {
        const [client, upstream] = pair;
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
        open.delete(pair);
        held.push(pair);
      }
    },
    frozen: () => held.length,
    async close() {
      for (const [a, b] of [...open, ...held]) {
        a.destroy();
        b.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
