/** Run tokens: JWTs for the run endpoint ({api_url}), signed with the current run-token key. */
import type { Router } from '@koa/router';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { readJsonBody } from '../../shared/http/body.ts';
import { issueRunToken } from '../../shared/run-tokens.ts';
import { type HandlerDeps, projectScope } from '../context.ts';
import { errorResponse, ok, operation, type Paths, TAG } from '../operation.ts';
import { RunTokenResponse } from '../present.ts';
import { activeKeySet } from '../signing-key.ts';
import { createRunTokenBody, parseOrThrow, toDate } from '../validation.ts';

const DAY_MS = 86_400_000;

export function registerRunTokenRoutes(router: Router, deps: HandlerDeps): void {
  router.post('createRunToken', '/v2/projects/:project_id/run-tokens', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const body = parseOrThrow(
      createRunTokenBody,
      (await readJsonBody(ctx, deps.settings.maxBodyBytes)) ?? {},
      'body',
    );
    const now = new Date(deps.clock.now());
    const expiresAt = toDate(body.expires_at);
    if (expiresAt.getTime() <= now.getTime())
      throw new ApiError(ErrorCode.Unprocessable, 'expires_at must be in the future');
    if (expiresAt.getTime() - now.getTime() > deps.settings.maxRunTokenDays * DAY_MS)
      throw new ApiError(
        ErrorCode.Unprocessable,
        `expires_at may be at most ${deps.settings.maxRunTokenDays} days ahead`,
      );
    const keys = activeKeySet(
      await deps.store.getRunTokenKeys(),
      now.getTime(),
      deps.settings.runTokenKeyActivationMs,
    );
    const token = await issueRunToken(keys, projectId, expiresAt, now);
    ctx.status = 201;
    ctx.set('cache-control', 'no-store');
    // JWT exp has second precision: report the expiry the token actually carries.
    const exp = new Date(Math.floor(expiresAt.getTime() / 1000) * 1000);
    ctx.body = { token, project_id: projectId, expires_at: exp.toISOString() };
  });
}

export const runTokenPaths: Paths = {
  '/v2/projects/{project_id}/run-tokens': {
    post: operation({
      operationId: 'createRunToken',
      tag: TAG.runTokens,
      summary: 'Issue a run token (JWT) for the run endpoint of this project',
      params: ['project_id'],
      body: createRunTokenBody,
      responses: {
        '201': ok('The token.', RunTokenResponse),
        '422': errorResponse('expires_at is in the past or beyond the maximum lifetime.'),
      },
    }),
  },
};
