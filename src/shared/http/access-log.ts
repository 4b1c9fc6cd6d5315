/**
 * One log line per call, written when the response is really over (for a stream that is after the
 * last event, which is after the middleware chain has returned). Each server records its own metrics
 * in `done` and may add fields to the line.
 */
import type { ServerResponse } from 'node:http';
import type { Middleware, ParameterizedContext } from 'koa';
import type { Logger } from '../log.ts';
import type { EdgeState } from './request-id.ts';

/** What the access log reads of a call (a Koa context, or the gateway's own CallContext). */
export interface AccessLogContext<S extends EdgeState> {
  readonly state: S;
  readonly status: number;
  readonly method: string;
  readonly res: ServerResponse;
}

export interface AccessLogHooks<
  S extends EdgeState,
  C extends AccessLogContext<S> = ParameterizedContext<S>,
> {
  now: () => number;
  /** Called as the request comes in (e.g. an in-flight gauge). */
  start?(ctx: C): void;
  /** Called once the response is over; returns extra fields for the log line. */
  done(ctx: C, seconds: number, aborted: boolean): Record<string, unknown>;
  /**
   * The server's logger: the line is written through it with `requestId` as a field (the same line as
   * through the request's child logger, without building one), and not built at all when its level is
   * off. Without it the line goes through `ctx.state.log`.
   */
  log?: Logger;
}

export function accessLog<S extends EdgeState>(hooks: AccessLogHooks<S>): Middleware<S> {
  return async (ctx, next) => {
    ctx.res.once('close', () => logAccess(hooks, ctx));
    hooks.start?.(ctx);
    await next();
  };
}

/** The end of a call (its response's `close`): `done`, then the access line. */
export function logAccess<S extends EdgeState, C extends AccessLogContext<S>>(
  hooks: AccessLogHooks<S, C>,
  ctx: C,
): void {
  const seconds = (hooks.now() - ctx.state.startedAt) / 1000;
  const aborted = !ctx.res.writableFinished;
  const extra = hooks.done(ctx, seconds, aborted);
  const level = ctx.status >= 500 ? 'error' : ctx.status >= 400 ? 'warn' : 'info';
  const log = hooks.log ?? ctx.state.log;
  if (!log.isLevelEnabled(level)) return;
  log[level](
    {
      ...(hooks.log ? { requestId: ctx.state.requestId } : {}),
      method: ctx.method,
      status: ctx.status,
      ...(ctx.state.errorCode ? { code: ctx.state.errorCode } : {}),
      durationMs: Math.round(seconds * 1000),
      aborted,
      ...extra,
    },
    'request',
  );
}
