import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { takeBody } from './body.ts';

/** Bound on one raw exchange with the test server. */
const EXCHANGE_TIMEOUT_MS = 5_000;

let server: Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

/** A node:http server answering each request with what takeBody gave it (or its error's message). */
async function bodyEcho(limit: number): Promise<number> {
  server = createServer((req, res) => {
    Promise.resolve(takeBody(req, limit)).then(
      (body) => res.end(`got ${body.length}: ${body.toString('latin1')}`),
      (err: Error) => res.end(`error: ${err.message}`),
    );
  });
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return typeof address === 'object' && address ? address.port : 0;
}

/** Sends `parts` on one connection, `gapMs` apart, and returns the answer's body. */
function exchange(port: number, parts: string[], gapMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('no answer in time'));
    }, EXCHANGE_TIMEOUT_MS);
    let text = '';
    socket.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(text)?.[1];
      if (head !== -1 && length !== undefined && text.length >= head + 4 + Number(length)) {
        clearTimeout(timer);
        socket.destroy();
        resolve(text.slice(head + 4, head + 4 + Number(length)));
      }
    });
    socket.on('error', reject);
    socket.on('connect', async () => {
      for (const [i, part] of parts.entries()) {
        if (i > 0) await new Promise((r) => setTimeout(r, gapMs));
        socket.write(part);
      }
    });
  });
}

describe('takeBody', () => {
  it('gives the whole declared body when it arrives in parts after the headers', async () => {
    const port = await bodyEcho(1024);
    const head = 'POST /x HTTP/1.1\r\nhost: t\r\ncontent-length: 11\r\n\r\n';
    // The handler runs before any of the body is there; its first part is not the body.
    await expect(exchange(port, [head, 'hello', ' world'], 30)).resolves.toBe('got 11: hello world');
  });

  it('gives the whole declared body sent with its headers', async () => {
    const port = await bodyEcho(1024);
    const request = 'POST /x HTTP/1.1\r\nhost: t\r\ncontent-length: 5\r\n\r\nhello';
    await expect(exchange(port, [request], 0)).resolves.toBe('got 5: hello');
  });

  it('waits for the end of a chunked body (no declared size)', async () => {
    const port = await bodyEcho(1024);
    const head = 'POST /x HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n';
    await expect(exchange(port, [head, '5\r\nhello\r\n', '6\r\n world\r\n', '0\r\n\r\n'], 30)).resolves.toBe(
      'got 11: hello world',
    );
  });

  it('refuses a body over the limit as it streams in', async () => {
    const port = await bodyEcho(8);
    const head = 'POST /x HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n';
    await expect(
      exchange(port, [head, '5\r\nhello\r\n', '6\r\n world\r\n', '0\r\n\r\n'], 30),
    ).resolves.toMatch(/^error: /);
  });
});
