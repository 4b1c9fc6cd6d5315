/**
 * A byte relay between the node's network namespace and the test runner's, through a Unix socket (the
 * file system is shared, networks are not). One end listens, every accepted connection is piped to the
 * other end; nothing is parsed or buffered, so SSE and long responses pass as they are written.
 *
 *   node relay.ts LISTEN CONNECT     each `tcp:HOST:PORT` or `unix:PATH`
 *
 * Run inside the namespace (nsenter) it brings a node address to a socket file, or a socket file to a
 * node address; relayServer() below is the runner's side.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export type Endpoint = { tcp: { host: string; port: number } } | { unix: string };

export function parseEndpoint(s: string): Endpoint {
  if (s.startsWith('unix:')) return { unix: s.slice(5) };
  const m = /^tcp:(.+):(\d+)$/.exec(s);
  if (!m?.[1] || !m[2]) throw new Error(`relay: bad endpoint ${s} (tcp:HOST:PORT or unix:PATH)`);
  return { tcp: { host: m[1], port: Number(m[2]) } };
}

const dial = (to: Endpoint): Socket =>
  'unix' in to ? connect({ path: to.unix }) : connect({ host: to.tcp.host, port: to.tcp.port });

function pipeBoth(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  const close = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', close);
  b.on('error', close);
  a.on('close', close);
  b.on('close', close);
}

/** Listens on `listen` and pipes each connection to `to`; resolves once listening. */
export async function relayServer(listen: Endpoint, to: Endpoint): Promise<Server> {
  const server = createServer({ allowHalfOpen: false }, (client) => pipeBoth(client, dial(to)));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if ('unix' in listen) server.listen(listen.unix, resolve);
    else server.listen(listen.tcp.port, listen.tcp.host, resolve);
  });
  return server;
}

if (process.argv[1] === import.meta.filename) {
  const [listen, to] = process.argv.slice(2);
  if (!listen || !to) {
    process.stderr.write('usage: relay.ts LISTEN CONNECT\n');
    process.exit(2);
  }
  await relayServer(parseEndpoint(listen), parseEndpoint(to));
  process.stdout.write('relay: listening\n');
}
