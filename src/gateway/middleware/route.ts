/** `POST /v4/<project_id>/<app_name>/<path>`: the only route; everything else is 404/405. */
import { DNS_LABEL } from '../../apis/names.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { checkForwardPath } from '../../shared/http/upstream.ts';
import type { GatewayContext } from '../context.ts';
import { appNotFound } from './auth.ts';

const RUN_PATH = /^\/v4\/([^/]+)\/([^/]+)(?:\/(.*))?$/;

/** decodeURIComponent, skipped for the usual segment without a `%` (it is a call into the runtime). */
function decoded(segment: string): string {
  return segment.includes('%') ? decodeURIComponent(segment) : segment;
}

/** Sets `ctx.state.target` from the path (unless a custom domain did) or throws the 404/405/400. */
export function route(ctx: Pick<GatewayContext, 'path' | 'method' | 'state' | 'set'>): void {
  if (!ctx.state.target) {
    const m = RUN_PATH.exec(ctx.path);
    if (!m?.[1] || !m[2])
      throw new ApiError(ErrorCode.NotFound, 'no such path; call POST /v4/<project_id>/<app_name>/<path>');
    let projectId: string;
    let appName: string;
    try {
      projectId = decoded(m[1]);
      appName = decoded(m[2]);
    } catch {
      throw new ApiError(ErrorCode.BadRequest, 'path is not valid percent-encoding');
    }
    ctx.state.target = { projectId, appName, path: m[3] ?? '' };
    // Project ids and app names are DNS labels (src/apis/names.ts): anything else cannot exist.
    if (!DNS_LABEL.test(projectId) || !DNS_LABEL.test(appName)) throw appNotFound(ctx.state.target);
  }
  if (ctx.method !== 'POST') {
    ctx.set('Allow', 'POST');
    throw new ApiError(ErrorCode.MethodNotAllowed, 'use POST to run an app');
  }
  checkForwardPath(ctx.state.target.path);
}
