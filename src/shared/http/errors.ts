/**
 * Turns anything thrown below into the one JSON error body `{"error": {"code", "message", ...}}` with
 * the status of its code (src/shared/errors.ts holds the code → status map).
 */
import type { ServerResponse } from 'node:http';
import type { Middleware } from 'koa';
import { type ApiError, toApiError } from '../errors.ts';
import type { EdgeState } from './request-id.ts';

/** What an error response writes to (a Koa context, or the gateway's own CallContext). */
export interface ErrorTarget {
  readonly state: EdgeState;
  readonly headerSent: boolean;
  readonly res: ServerResponse;
  status: number;
  type: string;
  body: unknown;
  set(field: string, value: string): void;
}

export interface ErrorBodyOptions {
  /** The error for a request no route answered (Koa left it 404 without a body). */
  notFound?: () => ApiError;
}

export function errorBody<S extends EdgeState>(opts: ErrorBodyOptions = {}): Middleware<S> {
  return async (ctx, next) => {
    try {
      await next();
      if (opts.notFound && ctx.status === 404 && ctx.body == null) throw opts.notFound();
    } catch (err) {
      writeError(ctx, err);
    }
  };
}

/** Answers `err` as the JSON error body; a response already started is cut instead. */
export function writeError(ctx: ErrorTarget, err: unknown): void {
  const e = toApiError(err);
  ctx.state.errorCode = e.code;
  ctx.state.errorMessage = e.message;
  if (e.status >= 500) ctx.state.log?.error({ err: e.cause ?? e, code: e.code }, e.message);
  if (ctx.headerSent) {
    // A stream already started: the only honest signal left is to cut the connection.
    ctx.res.destroy();
    return;
  }
  ctx.status = e.status;
  ctx.type = 'application/json';
  ctx.body = JSON.stringify(e.toBody());
  // A handler may have set a more precise challenge (e.g. error="invalid_token").
  if (e.status === 401 && !ctx.res.hasHeader('www-authenticate')) ctx.set('WWW-Authenticate', 'Bearer');
  // The rest of an over-large body is not read: do not keep the connection for another request.
  if (e.status === 413) ctx.set('Connection', 'close');
  if (e.retryAfter !== undefined) ctx.set('Retry-After', String(e.retryAfter));
}
