/**
 * Variants of the bare Node proxy (bare-proxy.ts) for `bench/floor.ts`: which part of a Node proxy's
 * CPU per call each layer costs (docs/benchmarks.md, "The Node HTTP floor (ninth round)"). Sync answers
 * only (no event streams). FLOOR_FEATURES is a comma-separated list:
 * - client: `agent` (undici Agent.dispatch, as bare-proxy.ts; the default), `pool` (one undici Pool for
 *   the origin), `pipeN` (that Pool with `pipelining: N`), `http` (node:http request on a keep-alive
 *   Agent), `net` (a hand-written HTTP/1.1 client on raw sockets: Content-Length answers only);
 * - `rawhead`: the answer's head as a flat array (`writeHead(status, [k, v, ...])`);
 * - `rawreq`: the upstream request's headers as a flat array taken from `req.rawHeaders` (no
 *   `req.headers` object);
 * - `srvopts`: createServer({ requireHostHeader: false, highWaterMark: 64 KiB, keepAliveTimeout: 65 s });
 * - `cork`: the answer's head and body written between `res.cork()` and `res.uncork()`;
 * - `netserver`: a hand-written HTTP/1.1 server on `net` (Content-Length requests only, one write per
 *   answer) instead of node:http: the event loop + syscall floor, not a usable server.
 * Env: FLOOR_UPSTREAM (origin), FLOOR_PORT; prints `listening <port> <pid>` once serving.
 */
import { createServer, Agent as HttpAgent, request as httpRequest } from 'node:http';
import { connect, createServer as createNetServer, type Socket } from 'node:net';
import { Agent, type Dispatcher, Pool } from 'undici';

const origin = process.env.FLOOR_UPSTREAM ?? 'http://127.0.0.1:8080';
const features = new Set((process.env.FLOOR_FEATURES ?? '').split(',').filter(Boolean));
const pipe = [...features].find((f) => /^pipe\d+$/.test(f));
const clientKind = features.has('pool')
  ? 'pool'
  : pipe
    ? 'pool'
    : features.has('http')
      ? 'http'
      : features.has('net')
        ? 'net'
        : 'agent';
const upstream = new URL(origin);

type Answer = (status: number, type: string, body: Buffer) => void;
type Send = (path: string, type: string, body: Buffer, answer: Answer) => void;

function undiciSend(d: Dispatcher, withOrigin: boolean): Send {
  return (path, type, body, answer) => {
    const out: Buffer[] = [];
    let status = 502;
    let rtype = 'application/octet-stream';
    d.dispatch(
      {
        ...(withOrigin ? { origin } : {}),
        path,
        method: 'POST',
        headers: features.has('rawreq') ? ['content-type', type] : { 'content-type': type },
        body,
      } as Dispatcher.DispatchOptions,
      {
        onRequestStart() {},
        onResponseStart(_c: unknown, statusCode: number, headers: Record<string, string | string[]>) {
          status = statusCode;
          const t = headers['content-type'];
          if (t) rtype = Array.isArray(t) ? (t[0] as string) : t;
        },
        onResponseData(_c: unknown, chunk: Buffer) {
          out.push(chunk);
        },
        onResponseEnd() {
          answer(status, rtype, out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out));
        },
        onResponseError() {
          answer(502, 'text/plain', Buffer.alloc(0));
        },
      } as unknown as Dispatcher.DispatchHandler,
    );
  };
}

function httpSend(): Send {
  const agent = new HttpAgent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  return (path, type, body, answer) => {
    const r = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        path,
        method: 'POST',
        agent,
        headers: { 'content-type': type, 'content-length': body.length },
      },
      (res) => {
        const out: Buffer[] = [];
        res.on('data', (c: Buffer) => out.push(c));
        res.on('end', () =>
          answer(
            res.statusCode ?? 502,
            (res.headers['content-type'] as string | undefined) ?? 'application/octet-stream',
            out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out),
          ),
        );
      },
    );
    r.on('error', () => answer(502, 'text/plain', Buffer.alloc(0)));
    r.end(body);
  };
}

/** Minimal HTTP/1.1 keep-alive client on raw sockets: Content-Length answers, one call per socket at a time. */
function netSend(): Send {
  const idle: Conn[] = [];
  interface Conn {
    sock: Socket;
    buf: Buffer;
    answer: Answer | undefined;
  }
  const onData = (c: Conn, chunk: Buffer) => {
    c.buf = c.buf.length ? Buffer.concat([c.buf, chunk]) : chunk;
    const end = c.buf.indexOf('\r\n\r\n');
    if (end < 0) return;
    const head = c.buf.toString('latin1', 0, end);
    const len = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
    if (c.buf.length < end + 4 + len) return;
    const status = Number(head.slice(9, 12));
    const type = /\r\ncontent-type:\s*([^\r]*)/i.exec(head)?.[1] ?? 'application/octet-stream';
    const body = c.buf.subarray(end + 4, end + 4 + len);
    c.buf = Buffer.alloc(0);
    const a = c.answer as Answer;
    c.answer = undefined;
    idle.push(c);
    a(status, type, body);
  };
  return (path, type, body, answer) => {
    let c = idle.pop();
    if (!c) {
      const sock = connect(Number(upstream.port), upstream.hostname);
      sock.setNoDelay(true);
      const conn: Conn = { sock, buf: Buffer.alloc(0), answer: undefined };
      sock.on('data', (chunk: Buffer) => onData(conn, chunk));
      sock.on('error', () => conn.answer?.(502, 'text/plain', Buffer.alloc(0)));
      c = conn;
    }
    c.answer = answer;
    const head = `POST ${path} HTTP/1.1\r\nhost: ${upstream.host}\r\ncontent-type: ${type}\r\ncontent-length: ${body.length}\r\n\r\n`;
    c.sock.write(Buffer.concat([Buffer.from(head, 'latin1'), body]));
  };
}

const send: Send =
  clientKind === 'agent'
    ? undiciSend(new Agent({ keepAliveTimeout: 30_000 }), true)
    : clientKind === 'pool'
      ? undiciSend(
          new Pool(origin, { keepAliveTimeout: 30_000, pipelining: pipe ? Number(pipe.slice(4)) : 1 }),
          false,
        )
      : clientKind === 'http'
        ? httpSend()
        : netSend();

function contentType(raw: string[]): string {
  for (let i = 0; i < raw.length; i += 2)
    if ((raw[i] as string).length === 12 && (raw[i] as string).toLowerCase() === 'content-type')
      return raw[i + 1] as string;
  return 'application/octet-stream';
}

let listening: { address(): unknown; listen(port: number, host: string, cb: () => void): unknown };
if (features.has('netserver')) {
  // Requests with Content-Length only; answers in one write.
  listening = createNetServer({ noDelay: true }, (sock) => {
    let buf: Buffer = Buffer.alloc(0);
    const next = () => {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.toString('latin1', 0, end);
      const len = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      if (buf.length < end + 4 + len) return;
      const path = head.slice(head.indexOf(' ') + 1, head.indexOf(' ', head.indexOf(' ') + 1));
      const type = /\r\ncontent-type:\s*([^\r]*)/i.exec(head)?.[1] ?? 'application/octet-stream';
      const body = Buffer.from(buf.subarray(end + 4, end + 4 + len));
      buf = buf.subarray(end + 4 + len);
      send(path, type, body, (status, rtype, answer) => {
        sock.write(
          Buffer.concat([
            Buffer.from(
              `HTTP/1.1 ${status} OK\r\ncontent-type: ${rtype}\r\ncontent-length: ${answer.length}\r\n\r\n`,
              'latin1',
            ),
            answer,
          ]),
        );
      });
    };
    sock.on('data', (c: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, c]) : c;
      next();
    });
    sock.on('error', () => {});
  });
} else {
  const opts = features.has('srvopts')
    ? { requireHostHeader: false, highWaterMark: 65536, keepAliveTimeout: 65_000 }
    : {};
  listening = createServer(opts, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
      const type = features.has('rawreq')
        ? contentType(req.rawHeaders)
        : (req.headers['content-type'] ?? 'application/octet-stream');
      send(req.url ?? '/', type, body, (status, rtype, answer) => {
        if (features.has('cork')) res.cork();
        if (features.has('rawhead'))
          res.writeHead(status, ['content-type', rtype, 'content-length', String(answer.length)]);
        else res.writeHead(status, { 'content-type': rtype, 'content-length': answer.length });
        res.end(answer);
        if (features.has('cork')) res.uncork();
      });
    });
  });
}

listening.listen(Number(process.env.FLOOR_PORT ?? 0), '127.0.0.1', () => {
  const address = listening.address();
  const port = typeof address === 'object' && address ? (address as { port: number }).port : 0;
  process.stdout.write(`listening ${port} ${process.pid}\n`);
});
process.once('SIGTERM', () => process.exit(0));
