import { createServer, type Server } from 'node:http';
import Koa from 'koa';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError, ErrorCode } from '../errors.ts';
import { listen } from '../listen.ts';
import { silentLogger } from '../log.ts';
import { accessLog } from './access-log.ts';
import { declaredBodyLimit, readJsonBody } from './body.ts';
import { errorBody } from './errors.ts';
import { CALLER_REQUEST_ID, type EdgeState, requestId } from './request-id.ts';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A server with the shared edge in front of `handler`; `done` collects what the access log saw. */
async function edge(handler: Koa.Middleware<EdgeState>, opts: { accept?: RegExp } = {}) {
  const done: Array<{ status: number; code?: string }> = [];
  const app = new Koa<EdgeState>();
  app.silent = true;
  let n = 0;
  app.use(requestId({ log: silentLogger(), now: Date.now, newId: () => `id-${++n}`, ...opts }));
  app.use(
    accessLog<EdgeState>({
      now: Date.now,
      done: (ctx) => {
        done.push({ status: ctx.status, ...(ctx.state.errorCode ? { code: ctx.state.errorCode } : {}) });
        return {};
      },
    }),
  );
  app.use(errorBody({ notFound: () => new ApiError(ErrorCode.NotFound, 'no such route') }));
  app.use(declaredBodyLimit(16));
  app.use(handler);
  const server = createServer(app.callback());
  servers.push(server);
  const port = await listen(server, 0, '127.0.0.1', 'TEST_PORT');
  return { url: `http://127.0.0.1:${port}`, done };
}

describe('the shared HTTP edge', () => {
  it('answers a thrown ApiError with its status, the one error body and Retry-After', async () => {
    const { url, done } = await edge(() => {
      throw new ApiError(ErrorCode.QueueUnavailable, 'busy', { retryAfter: 3, details: { queue: 'RUNS' } });
    });
    const r = await fetch(url);
    expect(r.status).toBe(503);
    expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(r.headers.get('retry-after')).toBe('3');
    expect(await r.json()).toEqual({ error: { code: 'queue_unavailable', message: 'busy', queue: 'RUNS' } });
    expect(done).toEqual([{ status: 503, code: 'queue_unavailable' }]);
  });

  it('hides an unexpected error behind a 500 that leaks nothing', async () => {
    const { url } = await edge(() => {
      throw new Error('secret detail');
    });
    const r = await fetch(url);
    expect(r.status).toBe(500);
    expect(await r.json()).toEqual({ error: { code: 'internal', message: 'internal error' } });
  });

  it('answers an unrouted request 404 with the error body', async () => {
    const { url } = await edge(async () => {});
    const r = await fetch(`${url}/nowhere`);
    expect(r.status).toBe(404);
    expect(await r.json()).toEqual({ error: { code: 'not_found', message: 'no such route' } });
  });

  it('adds a Bearer challenge to a 401 unless the handler set a more precise one', async () => {
    const { url } = await edge((ctx) => {
      if (ctx.path === '/precise') ctx.set('WWW-Authenticate', 'Bearer error="invalid_token"');
      throw new ApiError(ErrorCode.Unauthenticated, 'no');
    });
    expect((await fetch(url)).headers.get('www-authenticate')).toBe('Bearer');
    expect((await fetch(`${url}/precise`)).headers.get('www-authenticate')).toBe(
      'Bearer error="invalid_token"',
    );
  });

  it('refuses a declared or streamed body over the limit with 413, limit_bytes and Connection: close', async () => {
    const { url } = await edge(async (ctx) => {
      ctx.body = { got: await readJsonBody(ctx, 16) };
    });
    const declared = await fetch(url, { method: 'POST', body: 'x'.repeat(17) });
    expect(declared.status).toBe(413);
    expect(declared.headers.get('connection')).toBe('close');
    expect(await declared.json()).toMatchObject({ error: { code: 'payload_too_large', limit_bytes: 16 } });
    const ok = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"a":1}',
    });
    expect(await ok.json()).toEqual({ got: { a: 1 } });
    const notJson = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'hi',
    });
    expect(notJson.status).toBe(415);
  });

  it('reuses a caller request id only where the server accepts one', async () => {
    const ignoring = await edge(async (ctx) => {
      ctx.body = ctx.state.requestId;
    });
    const a = await fetch(ignoring.url, { headers: { 'x-request-id': 'mine' } });
    expect(a.headers.get('x-request-id')).toBe('id-1');
    expect(await a.text()).toBe('id-1');
    const accepting = await edge(
      async (ctx) => {
        ctx.body = ctx.state.requestId;
      },
      { accept: CALLER_REQUEST_ID },
    );
    expect(
      (await fetch(accepting.url, { headers: { 'x-request-id': 'mine' } })).headers.get('x-request-id'),
    ).toBe('mine');
    const bad = await fetch(accepting.url, { headers: { 'x-request-id': 'not mine!' } });
    expect(bad.headers.get('x-request-id')).toBe('id-1');
  });

  it('cuts a stream that fails after its headers were sent', async () => {
    const { url } = await edge(async (ctx) => {
      ctx.status = 200;
      ctx.type = 'text/event-stream';
      ctx.flushHeaders();
      ctx.res.write('data: 1\n\n');
      throw new Error('mid-stream');
    });
    const r = await fetch(url);
    expect(r.status).toBe(200);
    await expect(r.text()).rejects.toThrow();
  });
});
