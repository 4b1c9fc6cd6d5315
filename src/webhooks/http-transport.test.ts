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
});
