import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { text } from 'node:stream/consumers';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallAbort } from '../call-abort.ts';
import { ApiError } from '../errors.ts';
import { type DispatchCall, dispatchUpstream, readsWhole } from './upstream-dispatch.ts';

// A real app stand-in: each path answers one way.
const connections = new Set<number>();
let server: Server;
let agent: Agent;
let upstream: string;
const stalled: ServerResponse[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    connections.add(req.socket.remotePort ?? 0);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      switch (req.url) {
        case '/small':
          res.statusCode = 201;
          res.setHeader('content-type', 'application/json');
          res.setHeader('x-app', 'yes');
          res.end(JSON.stringify({ echo: body })); // with its Content-Length
          return;
        case '/big':
          res.writeHead(200, { 'content-length': 100_000 });
          res.end(Buffer.alloc(100_000, 'a'));
          return;
        case '/chunked':
          res.write('one,');
          setTimeout(() => res.end('two'), 20);
          return;
        case '/events':
          res.writeHead(200, { 'content-type': 'Text/Event-Stream', 'content-length': 12 });
          res.end('data: hi\n\n\n\n');
          return;
        case '/stall-body':
          res.writeHead(200, { 'content-length': 10 });
          res.write('half');
          stalled.push(res);
          return;
        default:
          // Never answers (until the server closes).
          stalled.push(res);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstream = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  agent = new Agent({ keepAliveTimeout: 30_000 });
});

afterAll(async () => {
  for (const res of stalled) res.destroy();
  await agent.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const call = (path: string, extra: Partial<DispatchCall> = {}): DispatchCall => ({
  dispatcher: agent,
  upstream,
  path,
  query: '',
  headers: { 'content-type': 'application/json' },
  body: Buffer.from('{"a":1}'),
  headersTimeoutMs: 5_000,
  bodyTimeoutMs: 5_000,
  wholeUpTo: 64 * 1024,
  ...extra,
});

describe('dispatchUpstream', () => {
  it('reads a small answer with a Content-Length whole, with its status and headers', async () => {
    const res = await dispatchUpstream(call('small'));
    expect(res.statusCode).toBe(201);
    expect(res.headers['x-app']).toBe('yes');
    expect(res.body).toBeUndefined();
    expect(res.whole?.toString()).toBe('{"echo":"{\\"a\\":1}"}');
  });

  it('streams an answer over the bound, one without a length, an event stream, and any answer without wholeUpTo', async () => {
    for (const [path, wholeUpTo, expected] of [
      ['big', 64 * 1024, 'a'.repeat(100_000)],
      ['chunked', 64 * 1024, 'one,two'],
      ['events', 64 * 1024, 'data: hi\n\n\n\n'],
      ['small', undefined, '{"echo":"{\\"a\\":1}"}'],
    ] as const) {
      const res = await dispatchUpstream(call(path, wholeUpTo === undefined ? { wholeUpTo: undefined } : {}));
      expect(res.whole, path).toBeUndefined();
      expect(await text(res.body as NodeJS.ReadableStream), path).toBe(expected);
      expect(res.body?.closed, path).toBe(true);
    }
  });

  it('keeps the connection for the next call after a whole answer and after a streamed one', async () => {
    await dispatchUpstream(call('small'));
    const before = new Set(connections);
    const streamed = await dispatchUpstream(call('chunked'));
    await text(streamed.body as NodeJS.ReadableStream);
    await dispatchUpstream(call('small'));
    expect(connections).toEqual(before);
  });

  it('maps a refused connection to 502 upstream_unreachable with its code', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const err = await dispatchUpstream(call('small', { upstream: `http://127.0.0.1:${port}` })).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(502);
    expect((err as ApiError).details?.reason).toBe('ECONNREFUSED');
  });

  it('maps a silent app to 504, also when the body of a whole answer stalls', async () => {
    for (const path of ['silent', 'stall-body']) {
      const err = await dispatchUpstream(call(path, { headersTimeoutMs: 200, bodyTimeoutMs: 200 })).catch(
        (e: unknown) => e,
      );
      expect((err as ApiError).status, path).toBe(504);
    }
  });

  it('rejects with the signal reason when aborted before the answer (AbortSignal or CallAbort)', async () => {
    for (const make of [
      () => {
        const c = new AbortController();
        return { signal: c.signal, abort: (r: Error) => c.abort(r) };
      },
      () => {
        const c = new CallAbort();
        return { signal: c, abort: (r: Error) => c.abort(r) };
      },
    ]) {
      const { signal, abort } = make();
      const pending = dispatchUpstream(call('silent', { signal }));
      setTimeout(() => abort(new Error('client went away')), 50);
      await expect(pending).rejects.toThrow('client went away');
      // Already aborted: nothing is sent.
      await expect(dispatchUpstream(call('small', { signal }))).rejects.toThrow('client went away');
    }
  });

  it('ends a streamed body with the signal reason when aborted mid-stream', async () => {
    const abort = new AbortController();
    const res = await dispatchUpstream(call('stall-body', { signal: abort.signal, wholeUpTo: 4 }));
    const body = res.body as NodeJS.ReadableStream & { closed: boolean };
    const read = text(body);
    abort.abort(new Error('client went away'));
    await expect(read).rejects.toThrow('client went away');
  });

  it('aborts the call when a streamed body is destroyed before its end', async () => {
    const res = await dispatchUpstream(call('stall-body', { wholeUpTo: 4 }));
    const served = stalled.at(-1) as ServerResponse;
    const closed = new Promise((resolve) => served.once('close', resolve));
    res.body?.destroy();
    await closed; // the app sees its connection go
  });
});

describe('readsWhole', () => {
  it('takes a declared length within the bound that is not an event stream', () => {
    expect(readsWhole({ 'content-length': '10' }, 10)).toBe(true);
    expect(readsWhole({ 'content-length': '11' }, 10)).toBe(false);
    expect(readsWhole({}, 10)).toBe(false);
    expect(readsWhole({ 'content-length': '1e1' }, 10)).toBe(false);
    expect(readsWhole({ 'content-length': '2', 'content-type': 'text/event-stream' }, 10)).toBe(false);
    expect(readsWhole({ 'content-length': '2' }, undefined)).toBe(false);
  });
});
