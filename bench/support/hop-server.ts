/**
 * A bare node:http server for bench/dataplane-hop.ts: the same handler on a TCP port (HOP_PORT) and on a
 * Unix socket (HOP_SOCKET), as Node's hand-off server will listen (design §1). It answers every request
 * with its body (an echo, like the benchmark app's), so both paths do the same work. Prints
 * `listening <port> <pid>` once both listen.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

const handler = (req: IncomingMessage, res: ServerResponse): void => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  });
};

const port = Number(process.env.HOP_PORT ?? 0);
const socket = process.env.HOP_SOCKET;
if (!socket) throw new Error('HOP_SOCKET: the Unix socket path to listen on');
const tcp = createServer(handler);
const unix = createServer(handler);
await new Promise<void>((resolve) => tcp.listen(port, '127.0.0.1', resolve));
await new Promise<void>((resolve) => unix.listen(socket, resolve));
const address = tcp.address();
process.stdout.write(
  `listening ${typeof address === 'object' && address ? address.port : port} ${process.pid}\n`,
);
