/**
 * `Authorization: Bearer <run token>`: missing or invalid → 401. A valid token of another project gets
 * exactly the body an unknown app gets, so nobody learns which apps exist elsewhere.
 */
import type { Middleware } from 'koa';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import type { RunTokenVerifier } from '../../shared/run-tokens.ts';
import type { GatewayState, RunTarget } from '../context.ts';

export function appNotFound(t: RunTarget): ApiError {
  return new ApiError(ErrorCode.NotFound, `no app "${t.appName}" in project "${t.projectId}"`);
}

export function auth(verify: RunTokenVerifier): Middleware<GatewayState> {
  return async (ctx, next) => {
    const header = ctx.get('authorization');
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m?.[1]) {
      ctx.set('WWW-Authenticate', 'Bearer');
      throw new ApiError(ErrorCode.Unauthenticated, 'missing bearer token (Authorization: Bearer <token>)');
    }
    let projectId: string;
    try {
      projectId = (await verify(m[1])).projectId;
    } catch {
      ctx.set('WWW-Authenticate', 'Bearer error="invalid_token"');
      throw new ApiError(ErrorCode.Unauthenticated, 'invalid or expired run token');
    }
    const target = ctx.state.target;
    if (!target || projectId !== target.projectId)
      throw appNotFound(target ?? { projectId: '', appName: '', path: '' });
    await next();
  };
}
