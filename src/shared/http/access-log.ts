/**
 * One log line per call, written when the response is really over (for a stream that is after the
 * last event, which is after the middleware chain has returned). Each server records its own metrics
 * in `done` and may add fields to the line.
 */
import type { Middleware, ParameterizedContext } from 'koa';
import type { EdgeState } from './request-id.ts';

export interface AccessLogHooks<S extends EdgeState> {
  now: () => number;
  /** Called as the request comes in (e.g. an in-flight gauge). */
  start?(ctx: ParameterizedContext<S>): void;
  /** Called once the response is over; returns extra fields for the log line. */
  done(ctx: ParameterizedContext<S>, seconds: number, aborted: boolean): Record<string, unknown>;
}

export function accessLog<S extends EdgeState>(hooks: AccessLogHooks<S>): Middleware<S> {
  return async (ctx, next) => {
    ctx.res.once('close', () => {
      const seconds = (hooks.now() - ctx.state.startedAt) / 1000;
      const aborted = !ctx.res.writableFinished;
      const line = {
        method: ctx.method,
        status: ctx.status,
        ...(ctx.state.errorCode ? { code: ctx.state.errorCode } : {}),
        durationMs: Math.round(seconds * 1000),
        aborted,
        ...hooks.done(ctx, seconds, aborted),
      };
      const log = ctx.state.log;
      if (ctx.status >= 500) log.error(line, 'request');
      else if (ctx.status >= 400) log.warn(line, 'request');
      else log.info(line, 'request');
    });
    hooks.start?.(ctx);
    await next();
  };
}
