/**
 * Request bodies with a hard size bound: a declared or streamed size over the limit is 413
 * `payload_too_large` with `limit_bytes`, before more is read.
 */
import type { IncomingMessage } from 'node:http';
import type { Context, Middleware } from 'koa';
import { ApiError, ErrorCode } from '../errors.ts';

export function payloadTooLarge(limitBytes: number, message?: string): ApiError {
  return new ApiError(
    ErrorCode.PayloadTooLarge,
    message ?? `request body is larger than ${limitBytes} bytes`,
    {
      details: { limit_bytes: limitBytes },
    },
  );
}

/** Refuses, before any route runs, a request whose Content-Length is over the limit. */
export function declaredBodyLimit(limitBytes: number): Middleware {
  return async (ctx, next) => {
    if (Number(ctx.get('content-length') || 0) > limitBytes) throw payloadTooLarge(limitBytes);
    await next();
  };
}

export function readBody(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  try {
    return Promise.resolve(takeBody(req, limitBytes));
  } catch (err) {
    return Promise.reject(err);
  }
}

/**
 * readBody, answered at once (or thrown at once: a declared size over the limit) when the whole body
 * is buffered already (a handler that waited for something first), so a caller on the hot path need
 * not wait a promise for it; a promise otherwise, settled as soon as the declared size has arrived. A
 * handler running in the request's own event (the gateway's usual call) is ahead of node's parser:
 * the body of that same packet is parsed just after it returns.
 */
export function takeBody(req: IncomingMessage, limitBytes: number): Buffer | Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limitBytes) throw payloadTooLarge(limitBytes);
  if (declared === req.readableLength && req.readableFlowing === null && !req.readableDidRead) {
    // The whole declared body is buffered already and nothing has read it: take it now instead of
    // waiting turns for its 'data' and 'end' events. Resumed, so the request still ends as a consumed one.
    const chunks: Buffer[] = [];
    for (let c = req.read() as Buffer | null; c !== null; c = req.read() as Buffer | null) chunks.push(c);
    req.resume();
    return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
  }
  // Listeners rather than `for await`: an async iterator costs a promise per chunk on every call.
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (err: unknown, body?: Buffer) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', done);
      req.off('close', onClose);
      if (err) reject(err);
      else resolve(body as Buffer);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        // The rest is not read (the 413 closes the connection); destroying the request would reset it.
        req.pause();
        done(payloadTooLarge(limitBytes));
        return;
      }
      chunks.push(chunk);
      // The declared size is all there is (node's parser passes on no more): the body is whole now,
      // without waiting for 'end', which node emits on a later tick after the stream's own bookkeeping
      // (~6 µs of every call whose body comes after its headers' event: docs/benchmarks.md, SSE tenth
      // round). 'end' still comes: the request flows on.
      if (size === declared)
        done(undefined, chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
    };
    const onEnd = () => done(undefined, Buffer.concat(chunks));
    const onClose = () => {
      if (!req.readableEnded) {
        const err = new Error('Premature close') as NodeJS.ErrnoException;
        err.code = 'ERR_STREAM_PREMATURE_CLOSE';
        done(err);
      }
    };
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', done);
    req.once('close', onClose);
  });
}

/** A JSON request body: undefined when there is none; not `application/json` → 415, not JSON → 400. */
export async function readJsonBody(ctx: Context, limitBytes: number): Promise<unknown> {
  const text = (await readBody(ctx.req, limitBytes)).toString('utf8');
  if (text.trim() === '') return undefined;
  if (!ctx.is('application/json'))
    throw new ApiError(ErrorCode.UnsupportedMediaType, 'request body must be application/json');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ApiError(ErrorCode.InvalidBody, 'request body is not valid JSON');
  }
}
