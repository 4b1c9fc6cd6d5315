/**
 * `Authorization: Bearer <run token>`: missing or invalid → 401. A valid token of another project gets
 * exactly the body an unknown app gets, so nobody learns which apps exist elsewhere.
 */
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import type { RunTokenVerifier } from '../../shared/run-tokens.ts';
import type { GatewayContext, RunTarget } from '../context.ts';

export function appNotFound(t: RunTarget): ApiError {
  return new ApiError(ErrorCode.NotFound, `no app "${t.appName}" in project "${t.projectId}"`);
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** Resolves when the call's token is valid for its target's project; throws the 401/404 otherwise. */
export async function authorize(
  ctx: Pick<GatewayContext, 'get' | 'set' | 'state'>,
  verify: RunTokenVerifier,
): Promise<void> {
  const m = BEARER.exec(ctx.get('authorization'));
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
}
