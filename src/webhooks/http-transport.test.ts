import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpTransport } from './http-transport.ts';
import { createSsrfGuard } from './ssrf.ts';

describe('http transport connections', () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    server?.close();
  });

  it('reuses a connection only for the same checked address (a rebinding answer gets its own)', async () => {
    const seen: Array<{ conn: number; local: string | undefined }> = [];
    let connections = 0;
    server = createServer((req, res) => {
      seen.push({ conn: Number((req.socket as { n?: number }).n), local: req.socket.localAddress });
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    server.on('connection', (s) => {
      (s as { n?: number }).n = ++connections;
    });
    server.listen(0, '0.0.0.0');
    await once(server, 'listening');
    const port = (server.address() as AddressInfo).port;

    let answer = '127.0.0.1';
    const transport = createHttpTransport({
      guard: createSsrfGuard({
        allowCidrs: ['127.0.0.0/8'],
        resolveHost: async () => [{ address: answer, family: 4 }],
      }),
      attemptTimeoutMs: 10_000,
      maxResponseBytes: 1024,
    });
    const url = new URL(`http://hooks.example:${port}/hook`);
    const send = async () => {
      const r = await transport.send(url, {
        headers: { 'content-type': 'application/json' },
        body: Buffer.from('{}'),
      });
      // undici hands a connection back to its pool a tick after the answer is read.
      await new Promise((resolve) => setImmediate(resolve));
      return r;
    };
    try {
      expect(await send()).toMatchObject({ outcome: 'success', status: 200 });
      expect(await send()).toMatchObject({ outcome: 'success', status: 200 });
      answer = '127.0.0.2';
      expect(await send()).toMatchObject({ outcome: 'success', status: 200 });
    } finally {
      await transport.close?.();
    }
    expect(seen).toEqual([
      { conn: 1, local: '127.0.0.1' },
      { conn: 1, local: '127.0.0.1' },
      { conn: 2, local: '127.0.0.2' },
    ]);
  });

  it('bounds the whole attempt: a DNS answer that never comes is a timeout', async () => {
    const transport = createHttpTransport({
      guard: createSsrfGuard({ allowCidrs: [], resolveHost: () => new Promise(() => {}) }),
      attemptTimeoutMs: 200,
      maxResponseBytes: 1024,
    });
    const r = await transport.send(new URL('http://hooks.example/hook'), {
      headers: {},
      body: Buffer.from('{}'),
    });
    expect(r).toEqual({ outcome: 'timeout', error: 'no complete answer within 200 ms' });
  });

  it('a status that came in time stands when the body stalls past the bound', async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-length': '10' });
        res.write('12345'); // and never the rest
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as AddressInfo).port;
    const transport = createHttpTransport({
      guard: createSsrfGuard({ allowCidrs: ['127.0.0.0/8'], resolveHost: async () => [] }),
      attemptTimeoutMs: 300,
      maxResponseBytes: 1024,
    });
    try {
      const r = await transport.send(new URL(`http://127.0.0.1:${port}/hook`), {
        headers: {},
        body: Buffer.from('{}'),
      });
      expect(r).toEqual({ outcome: 'success', status: 200 });
    } finally {
      await transport.close?.();
    }
  });

  it("sends the POST with the given headers and body to the URL's path and query", async () => {
    let seen: { method?: string; url?: string; host?: string; type?: string; body: string } | undefined;
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen = {
          method: req.method,
          url: req.url,
          host: req.headers.host,
          type: req.headers['content-type'],
          body: Buffer.concat(chunks).toString(),
        };
        res.writeHead(404).end();
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as AddressInfo).port;
    const transport = createHttpTransport({
      guard: createSsrfGuard({ allowCidrs: ['127.0.0.0/8'], resolveHost: async () => [] }),
      attemptTimeoutMs: 10_000,
      maxResponseBytes: 1024,
    });
    try {
      const r = await transport.send(new URL(`http://127.0.0.1:${port}/a/hook?x=1&y=2`), {
        headers: { 'content-type': 'application/json' },
        body: Buffer.from('{"ok":true}'),
      });
      expect(r).toEqual({ outcome: 'http_retryable', status: 404 });
    } finally {
      await transport.close?.();
    }
    expect(seen).toEqual({
      method: 'POST',
      url: '/a/hook?x=1&y=2',
      host: `127.0.0.1:${port}`,
      type: 'application/json',
      body: '{"ok":true}',
    });
  });
});
