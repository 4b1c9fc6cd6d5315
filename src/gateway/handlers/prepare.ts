/**
 * Everything a run call must pass before the app is called or the run is queued: the app exists (and
 * so does the Cortex function, when known), the webhook endpoint is well-formed, and the body fits and
 * is a JSON object for a Cortex app. Whether a replica is ready is the balancer's concern: a call to an
 * app that is starting (or scaled to zero) is held until one is, within the cold-start bound.
 */

import type { WebhookTarget } from '../../shared/contracts/messaging.ts';
import type { MaybePromise, ResolvedApp } from '../../shared/contracts/seams.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { forwardQuery, forwardRequestHeaders } from '../../shared/http/upstream.ts';
import type { SecretBox } from '../../shared/secretbox.ts';
import { parseWebhookEndpoint } from '../../webhooks/publish.ts';
import { checkCortexBody, takeBody } from '../body.ts';
import type { GatewayContext, RunTarget } from '../context.ts';
import { appNotFound } from '../middleware/auth.ts';

export interface PreparedRun {
  target: RunTarget;
  app: ResolvedApp;
  body: Buffer;
  query: string;
  headers: Record<string, string>;
  webhook?: WebhookTarget;
  async: boolean;
}

export interface PrepareDeps {
  /** The app, at once when the resolver knows it from memory (see AppResolver). */
  resolve(projectId: string, appName: string): MaybePromise<ResolvedApp | undefined>;
  secretBox: SecretBox;
  maxBodyBytes: number;
}

const NO_PARAMS: Pick<URLSearchParams, 'get'> = { get: () => null };

export function isAsyncRequested(value: string | undefined): boolean {
  if (value === undefined) return false;
  const v = value.toLowerCase();
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0' || v === '') return false;
  throw new ApiError(ErrorCode.BadRequest, 'async must be true or false', {
    details: { parameter: 'async' },
  });
}

/**
 * The checks, in order: the async flag, the app (and function), the webhook endpoint, the body. A
 * promise only when the app lookup or the body is not at hand yet (the usual call has both: its body
 * came in the request's packet), so a call is not made to wait turns for work that is done.
 */
export function prepareRun(ctx: GatewayContext, deps: PrepareDeps): MaybePromise<PreparedRun> {
  const target = ctx.state.target;
  if (!target) throw new ApiError(ErrorCode.NotFound, 'no such path');
  const params = ctx.querystring === '' ? NO_PARAMS : new URLSearchParams(ctx.querystring);
  const isAsync = isAsyncRequested(params.get('async') ?? undefined);
  // Known as async from here on, also when refused below (it is then no sync call to record).
  if (isAsync) ctx.state.mode = 'async';

  const app = deps.resolve(target.projectId, target.appName);
  if (app instanceof Promise) return app.then((a) => withApp(ctx, deps, target, params, isAsync, a));
  return withApp(ctx, deps, target, params, isAsync, app);
}

function withApp(
  ctx: GatewayContext,
  deps: PrepareDeps,
  target: RunTarget,
  params: Pick<URLSearchParams, 'get'>,
  isAsync: boolean,
  app: ResolvedApp | undefined,
): MaybePromise<PreparedRun> {
  if (!app) throw appNotFound(target);
  ctx.state.app = app;
  if (app.runtime === 'cortex') {
    if (target.path === '' || target.path.includes('/')) {
      throw new ApiError(ErrorCode.NotFound, 'name a function: POST /v4/<project_id>/<app_name>/<function>');
    }
    // decodeURIComponent (a call into the runtime) only for a name with a `%`, as route() does.
    const name = target.path.includes('%') ? decodeURIComponent(target.path) : target.path;
    if (app.functions && !app.functions.includes(name)) {
      throw new ApiError(ErrorCode.NotFound, `app "${target.appName}" has no function "${target.path}"`);
    }
  }

  let webhook: WebhookTarget | undefined;
  const rawEndpoint = params.get('webhookEndpoint');
  if (rawEndpoint !== null) {
    const url = parseWebhookEndpoint(rawEndpoint);
    const secret = ctx.get('x-webhook-secret');
    webhook = { endpoint: url.toString(), ...(secret ? { sealedSecret: deps.secretBox.seal(secret) } : {}) };
    ctx.state.webhookHost = url.host;
  }

  const body = takeBody(ctx.req, deps.maxBodyBytes);
  if (body instanceof Promise) return body.then((b) => withBody(ctx, target, app, isAsync, webhook, b));
  return withBody(ctx, target, app, isAsync, webhook, body);
}

function withBody(
  ctx: GatewayContext,
  target: RunTarget,
  app: ResolvedApp,
  isAsync: boolean,
  webhook: WebhookTarget | undefined,
  body: Buffer,
): PreparedRun {
  if (app.runtime === 'cortex') checkCortexBody(body);
  const headers = forwardRequestHeaders(ctx.req.headers, ctx.state.requestId);
  // The webhook gets the response body as is, labelled JSON: it must not be gzip the caller asked for.
  if (webhook) delete headers['accept-encoding'];
  return {
    target,
    app,
    body,
    query: forwardQuery(ctx.querystring),
    headers,
    ...(webhook ? { webhook } : {}),
    async: isAsync,
  };
}
