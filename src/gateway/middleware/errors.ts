/** Turns anything thrown below into the shared JSON error body with the right status. */
import type { Middleware } from 'koa';
import { toApiError } from '../../shared/errors.ts';
import type { GatewayState } from '../context.ts';

export function errorBody(): Middleware<GatewayState> {
  return async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      const apiErr = toApiError(err);
      const log = ctx.state.log;
      if (apiErr.status >= 500) log?.error({ err, code: apiErr.code }, apiErr.message);
      else log?.warn({ code: apiErr.code, status: apiErr.status }, apiErr.message);
      if (ctx.headerSent) {
        // A stream already started: the only honest signal left is to cut the connection.
        ctx.res.destroy();
        return;
      }
      ctx.status = apiErr.status;
      ctx.type = 'application/json';
      ctx.body = JSON.stringify(apiErr.toBody());
      if (apiErr.retryAfter !== undefined) ctx.set('Retry-After', String(apiErr.retryAfter));
    }
  };
}
