/**
 * createManagementApi: the Koa app of {base_url}. The shared edge (request id → access log + metrics →
 * error body → body limit), then the routes. No port is opened here (main.ts does that).
 */
import { Router } from '@koa/router';
import Koa from 'koa';
import { Counter, Histogram, type Registry } from 'prom-client';
import { createDashboard } from '../dashboard/dashboard.ts';
import type { DashboardMount } from '../dashboard/mount.ts';
import { type Clock, systemClock } from '../shared/clock.ts';
import { ApiError, ErrorCode } from '../shared/errors.ts';
import { accessLog } from '../shared/http/access-log.ts';
import { declaredBodyLimit } from '../shared/http/body.ts';
import { errorBody } from '../shared/http/errors.ts';
import { CALLER_REQUEST_ID, type EdgeState, requestId } from '../shared/http/request-id.ts';
import type { Logger } from '../shared/log.ts';
import { DEFAULT_SETTINGS, type HandlerDeps, type ManagementSettings } from './context.ts';
import type { DeployApi } from './deploy-api.ts';
import type { LogSource } from './logs/types.ts';
import { openApiDocument, openApiYaml } from './openapi.ts';
import type { DeliveryReader, RunReader } from './readers.ts';
import { registerAppRoutes } from './routes/apps.ts';
import { registerDomainRoutes } from './routes/domains.ts';
import { registerLogRoutes } from './routes/logs.ts';
import { registerRunTokenRoutes } from './routes/run-tokens.ts';
import { registerRunRoutes } from './routes/runs.ts';
import { registerServiceAccountRoutes } from './routes/service-accounts.ts';
import { type Authenticator, createAuthenticator, type Principal } from './service-accounts.ts';
import type { ManagementStore } from './store/types.ts';

export interface ManagementApiDeps {
  store: ManagementStore;
  runs: RunReader;
  deliveries: DeliveryReader;
  logs?: LogSource;
  log: Logger;
  registry: Registry;
  clock?: Clock;
  settings?: Partial<ManagementSettings>;
  /** The browser dashboard at /dashboard (and `/` redirecting there); not served when absent. */
  dashboard?: DashboardMount;
  /** Deploys: the apps and builds routes answer 404 without it. */
  deploy?: DeployApi;
}

/** The edge's state plus who called (set by projectScope, for the access log). */
export interface ManagementState extends EdgeState {
  principal?: Principal;
}

const NO_ROUTE = 'no such route';

export function createManagementApi(
  deps: ManagementApiDeps,
): Koa<ManagementState> & { router: Router; auth: Authenticator } {
  const settings: ManagementSettings = { ...DEFAULT_SETTINGS, ...deps.settings };
  const clock = deps.clock ?? systemClock;
  const auth = createAuthenticator({
    store: deps.store,
    settings: {
      cacheMs: settings.authCacheMs,
      touchIntervalMs: settings.lastUsedIntervalMs,
    },
    log: deps.log,
    now: () => clock.now(),
  });
  const handlerDeps: HandlerDeps = {
    store: deps.store,
    runs: deps.runs,
    deliveries: deps.deliveries,
    ...(deps.logs ? { logs: deps.logs } : {}),
    ...(deps.deploy ? { deploy: deps.deploy } : {}),
    auth,
    clock,
    settings,
  };

  const requests = new Counter({
    name: 'apphost_management_requests_total',
    help: 'Management API requests by route and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [deps.registry],
  });
  const duration = new Histogram({
    name: 'apphost_management_request_duration_seconds',
    help: 'Management API request duration.',
    labelNames: ['method', 'route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [deps.registry],
  });

  const router = new Router();
  router.get('getOpenApiJson', '/openapi.json', (ctx) => {
    ctx.body = openApiDocument();
  });
  const yaml = openApiYaml();
  router.get('getOpenApiYaml', '/openapi.yaml', (ctx) => {
    ctx.type = 'application/yaml';
    ctx.body = yaml;
  });
  registerDomainRoutes(router, handlerDeps);
  registerServiceAccountRoutes(router, handlerDeps);
  registerRunTokenRoutes(router, handlerDeps);
  registerRunRoutes(router, handlerDeps);
  registerLogRoutes(router, handlerDeps);
  registerAppRoutes(router, handlerDeps);

  const app = new Koa<ManagementState>() as Koa<ManagementState> & { router: Router; auth: Authenticator };
  app.router = router;
  app.auth = auth;
  app.silent = true;

  app.use(requestId({ log: deps.log, now: () => clock.now(), accept: CALLER_REQUEST_ID }));
  app.use(
    accessLog<ManagementState>({
      now: () => clock.now(),
      done: (ctx, seconds) => {
        const route = typeof ctx._matchedRoute === 'string' ? ctx._matchedRoute : 'unmatched';
        requests.inc({ method: ctx.method, route, status: String(ctx.status) });
        duration.observe({ method: ctx.method, route }, seconds);
        const principal = ctx.state.principal;
        return {
          route,
          ...(principal ? { projectId: principal.projectId, serviceAccount: principal.serviceAccount } : {}),
        };
      },
    }),
  );
  app.use(errorBody<ManagementState>({ notFound: () => new ApiError(ErrorCode.NotFound, NO_ROUTE) }));
  // A bundle upload has its own, larger bound (routes/apps.ts).
  const bodyLimit = declaredBodyLimit(settings.maxBodyBytes);
  app.use((ctx, next) => (isBundleUpload(ctx) ? next() : bodyLimit(ctx, next)));
  if (deps.dashboard)
    app.use(
      createDashboard({
        ...handlerDeps,
        log: deps.log,
        maxServiceAccountDays: settings.maxServiceAccountDays,
        // The dashboard's live tail follows the same source within the same bounds as the logs API.
        logBounds: {
          maxMs: settings.logsFollowMaxMs,
          heartbeatMs: settings.logsHeartbeatMs,
          maxBufferedBytes: settings.logsMaxBufferedBytes,
          maxLines: settings.logsMaxLines,
        },
        ...deps.dashboard,
      }),
    );
  app.use(router.routes());
  app.use(
    router.allowedMethods({
      throw: true,
      methodNotAllowed: () => new ApiError(ErrorCode.MethodNotAllowed, 'method not allowed on this path'),
      notImplemented: () => new ApiError(ErrorCode.MethodNotAllowed, 'method not implemented'),
    }),
  );
  return app;
}

export const NO_ROUTE_MESSAGE = NO_ROUTE;

const BUNDLE_UPLOAD = /^\/v2\/projects\/[^/]+\/apps\/?$/;
function isBundleUpload(ctx: Koa.Context): boolean {
  return ctx.method === 'POST' && BUNDLE_UPLOAD.test(ctx.path);
}
