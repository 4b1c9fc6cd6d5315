/**
 * The sync benchmark's floor: the least a Node process can do to proxy a call — a `node:http` server
 * that reads the body and sends it on with undici's `Agent.dispatch` (a keep-alive pool, as the
 * gateway's), then answers with the app's status, Content-Type and body in one `writeHead` + `end`;
 * an event stream (`text/event-stream`) is written on as it comes (head at once, each chunk as undici
 * hands it over, pausing while the caller's socket is full): the SSE rows' floor.
 * No request id, auth, routing, balancer, header forwarding, metrics, logs, timeouts or error bodies:
 * what is left is node:http and undici themselves (docs/benchmarks.md, "The floor: a bare Node proxy").
 * Env: BARE_PROXY_UPSTREAM (origin), BARE_PROXY_PORT; prints `listening <port> <pid>` once serving.
 */

import type { IncomingHttpHeaders } from 'node:http';
import { createServer } from 'node:http';
import { Agent } from 'undici';

const origin = process.env.BARE_PROXY_UPSTREAM ?? 'http://127.0.0.1:8080';
const agent = new Agent({ keepAliveTimeout: 30_000 });

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    const out: Buffer[] = [];
    let status = 502;
    let type: string | undefined;
    let streaming = false;
    agent.dispatch(
      {
        origin,
        path: req.url ?? '/',
        method: 'POST',
        headers: { 'content-type': req.headers['content-type'] ?? 'application/octet-stream' },
        body,
      },
      {
        onRequestStart() {},
        onResponseStart(_c: unknown, statusCode: number, headers: IncomingHttpHeaders) {
          status = statusCode;
          const t = headers['content-type'];
          type = Array.isArray(t) ? t[0] : t;
          streaming = type?.startsWith('text/event-stream') ?? false;
          if (streaming)
            res.writeHead(status, { 'content-type': type as string, 'cache-control': 'no-cache' });
        },
        onResponseData(c: { pause(): void; resume(): void }, chunk: Buffer) {
          if (!streaming) out.push(chunk);
          else if (!res.write(chunk)) {
            c.pause();
            res.once('drain', () => c.resume());
          }
        },
        onResponseEnd() {
          if (streaming) {
            res.end();
            return;
          }
          const answer = out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out);
          res.writeHead(status, {
            'content-type': type ?? 'application/octet-stream',
            'content-length': answer.length,
          });
          res.end(answer);
        },
        onResponseError() {
          res.writeHead(502, { 'content-length': 0 });
          res.end();
        },
      },
    );
  });
});

server.listen(Number(process.env.BARE_PROXY_PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.stdout.write(`listening ${port} ${process.pid}\n`);
});
process.once('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  void agent.close();
});
