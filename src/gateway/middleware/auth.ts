/**
 * `Authorization: Bearer <run token>`: missing or invalid → 401. A valid token of another project gets
 * exactly the body an unknown app gets, so nobody learns which apps exist elsewhere.
 */
import type { MaybePromise } from '../../shared/contracts/seams.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import type { RunTokenClaims } from '../../shared/run-tokens.ts';
import type { GatewayContext, RunTarget } from '../context.ts';

export function appNotFound(t: RunTarget): ApiError {
  return new ApiError(ErrorCode.NotFound, `no app "${t.appName}" in project "${t.projectId}"`);
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** Verifies a run token: claims at once when known (the gateway's cache), a promise otherwise. */
export type VerifyRunToken = (token: string) => MaybePromise<RunTokenClaims>;

type AuthContext = Pick<GatewayContext, 'get' | 'set' | 'state'>;

/**
 * Returns (or resolves) when the call's token is valid for its target's project; throws (or rejects
 * with) the 401/404 otherwise. A promise only when `verify` answers with one.
 */
export function authorize(ctx: AuthContext, verify: VerifyRunToken): Promise<void> | undefined {
  const m = BEARER.exec(ctx.get('authorization'));
  if (!m?.[1]) {
    ctx.set('WWW-Authenticate', 'Bearer');
    throw new ApiError(ErrorCode.Unauthenticated, 'missing bearer token (Authorization: Bearer <token>)');
  }
  let claims: MaybePromise<RunTokenClaims>;
  try {
    claims = verify(m[1]);
  } catch {
    throw invalidToken(ctx);
  }
  if (claims instanceof Promise)
    return claims.then(
      (c) => checkProject(ctx, c.projectId),
      () => {
        throw invalidToken(ctx);
      },
    );
  checkProject(ctx, claims.projectId);
  return undefined;
}

function invalidToken(ctx: AuthContext): ApiError {
  ctx.set('WWW-Authenticate', 'Bearer error="invalid_token"');
  return new ApiError(ErrorCode.Unauthenticated, 'invalid or expired run token');
}

function checkProject(ctx: AuthContext, projectId: string): void {
  const target = ctx.state.target;
  if (!target || projectId !== target.projectId)
    throw appNotFound(target ?? { projectId: '', appName: '', path: '' });
}
