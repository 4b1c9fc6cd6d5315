/**
 * Gives every call its own id: returned as `X-Request-Id`, sent to the app, used as the async run id
 * and bound to the request's logger. A caller-supplied id is not reused, so ids stay unique.
 */
import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from '../../shared/log.ts';
import type { GatewayState } from '../context.ts';

export function requestId(
  log: Logger,
  now: () => number,
  newId: () => string = randomUUID,
): Middleware<GatewayState> {
  return async (ctx, next) => {
    const id = newId();
    ctx.state.requestId = id;
    ctx.state.startedAt = now();
    ctx.state.log = log.child({ requestId: id });
    ctx.set('X-Request-Id', id);
    await next();
  };
}
