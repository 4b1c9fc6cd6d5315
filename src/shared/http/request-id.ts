/**
 * Gives every call an id: returned as `X-Request-Id` and bound to the request's logger. A caller's id
 * is reused only where `accept` allows it: the gateway never does (its ids are run ids and must stay
 * unique), the management API does for well-formed ids (so a client can correlate its own calls).
 */
import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from '../log.ts';

/** What the shared edge middleware keeps on `ctx.state`. */
export interface EdgeState {
  requestId: string;
  log: Logger;
  /** `now()` when the request came in (ms). */
  startedAt: number;
  /** The error code of an error response, for the access log. */
  errorCode?: string;
  /** Its message (the gateway records it with a sync call). */
  errorMessage?: string;
}

export interface RequestIdOptions {
  log: Logger;
  now: () => number;
  newId?: () => string;
  /** A caller-supplied `X-Request-Id` matching this is used as the id. */
  accept?: RegExp;
}

/** The ids the management API takes from its callers. */
export const CALLER_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export function requestId<S extends EdgeState>(opts: RequestIdOptions): Middleware<S> {
  const newId = opts.newId ?? randomUUID;
  return async (ctx, next) => {
    const given = opts.accept ? ctx.get('x-request-id') : '';
    const id = given && opts.accept?.test(given) ? given : newId();
    ctx.state.requestId = id;
    ctx.state.startedAt = opts.now();
    // The request's logger is built on first use: most calls log nothing but their access line,
    // which the access log writes through the server's logger (a child costs a few µs per call).
    let log: Logger | undefined;
    Object.defineProperty(ctx.state, 'log', {
      configurable: true,
      enumerable: true,
      get: () => {
        log ??= opts.log.child({ requestId: id });
        return log;
      },
      set: (l: Logger) => {
        log = l;
      },
    });
    ctx.set('X-Request-Id', id);
    await next();
  };
}
