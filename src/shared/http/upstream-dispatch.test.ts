import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { finished } from 'node:stream/promises';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/harness/process.ts';
import { CallAbort } from '../call-abort.ts';
import { ApiError } from '../errors.ts';
import { type DispatchCall, dispatchUpstream, readsWhole, sendsTo } from './upstream-dispatch.ts';

// A real app stand-in: each path answers one way.
const connections = new Set<number>();
let server: Server;
let agent: Agent;
let upstream: string;
const stalled: ServerResponse[] = [];
/** '/flood' writes this much as fast as its connection takes it (waiting for 'drain'). */
const FLOOD_BYTES = 64 * 1024 * 1024;
const flood = { written: 0, done: false };

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
        case '/flood': {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          const chunk = Buffer.alloc(64 * 1024, 'a');
          flood.written = 0;
          flood.done = false;
          const more = () => {
            while (flood.written < FLOOD_BYTES) {
              flood.written += chunk.length;
              if (!res.write(chunk)) {
                res.once('drain', more);
                return;
              }
            }
            flood.done = true;
            res.end();
          };
          more();
          return;
        }
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

/**
 * A sink as the caller's response is one: collects what it is handed; past `holdAfter` bytes it takes
 * nothing more (its write callbacks wait, so no 'drain') until `release()`.
 */
function sink(holdAfter = Number.POSITIVE_INFINITY) {
  const held: Array<() => void> = [];
  const got: Buffer[] = [];
  let taken = 0;
  let open = true;
  const w = new Writable({
    write(chunk: Buffer, _enc, cb) {
      got.push(chunk);
      taken += chunk.length;
      if (open && taken <= holdAfter) cb();
      else {
        open = false;
        held.push(cb);
      }
    },
  });
  return Object.assign(w, {
    /** Bytes it took (its write callbacks may still wait). */
    taken: () => taken,
    text: () => Buffer.concat(got).toString(),
    release() {
      open = true;
      holdAfter = Number.POSITIVE_INFINITY;
      for (const cb of held.splice(0)) cb();
    },
  });
}

describe('a streamed answer written straight into a sink (sendTo)', () => {
  it('writes what came with the head first, then each chunk as it comes, and ends the sink; the body closes', async () => {
    for (const [path, expected] of [
      ['events', 'data: hi\n\n\n\n'], // head, event and end in one read: held before the sink is there
      ['chunked', 'one,two'], // the second chunk comes 20 ms later, straight to the sink
    ] as const) {
      const res = await dispatchUpstream(call(path));
      const body = res.body as NonNullable<typeof res.body>;
      if (!sendsTo(body)) throw new Error('not a direct body');
      const out = sink();
      body.sendTo(out);
      await finished(out);
      expect(out.text(), path).toBe(expected);
      await finished(body); // ends and closes with the answer (the replica's slot goes with 'close')
      expect(body.closed, path).toBe(true);
    }
  });

  it('stops reading while the sink is full and goes on at its drain, so a slow caller holds the app back', async () => {
    const res = await dispatchUpstream(call('flood'));
    const body = res.body as NonNullable<typeof res.body>;
    if (!sendsTo(body)) throw new Error('not a direct body');
    const out = sink(1024 * 1024);
    body.sendTo(out);
    // Once the sink stops taking and nothing reads the connection, the app's writes stop at what the
    // sockets' buffers hold (without the pause, the gateway would take the whole flood into memory).
    await waitFor(
      'the app to be held back',
      async () => {
        const before = flood.written;
        await new Promise((resolve) => setTimeout(resolve, 100));
        return out.taken() > 1024 * 1024 && flood.written === before && !flood.done;
      },
      20_000,
      0,
    );
    expect(flood.done).toBe(false);
    // Handed to the sink after it said no: at most the rest of one read of the connection.
    expect(out.writableLength).toBeLessThan(256 * 1024);
    out.release();
    await finished(out);
    expect(flood.done).toBe(true);
    expect(out.taken()).toBe(FLOOD_BYTES);
  });

  it('errors the body with the reason and leaves the sink open when the call is aborted mid-stream', async () => {
    const abort = new AbortController();
    const res = await dispatchUpstream(call('stall-body', { signal: abort.signal, wholeUpTo: 4 }));
    const body = res.body as NonNullable<typeof res.body>;
    if (!sendsTo(body)) throw new Error('not a direct body');
    const out = sink();
    body.sendTo(out);
    const failed = once(body, 'error');
    abort.abort(new Error('client went away'));
    const [err] = await failed;
    expect((err as Error).message).toBe('client went away');
    expect(out.writableEnded).toBe(false); // the caller cuts it (CallContext), so the truncation shows
    expect(out.text()).toBe('half');
  });

  it('cuts the sink when the body was let go before it', async () => {
    const res = await dispatchUpstream(call('stall-body', { wholeUpTo: 4 }));
    const body = res.body as NonNullable<typeof res.body>;
    if (!sendsTo(body)) throw new Error('not a direct body');
    body.destroy();
    const out = sink();
    body.sendTo(out);
    expect(out.destroyed).toBe(true);
  });
});
