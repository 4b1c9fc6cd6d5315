/**
 * createManagementApi: the Koa app of {base_url}. Middleware: request id → access log + metrics →
 * one error mapper (ApiError JSON) → routes. No port is opened here (main.ts does that).
 */
import { randomUUID } from 'node:crypto';
import { Router } from '@koa/router';
import Koa from 'koa';
import { Counter, Histogram, type Registry } from 'prom-client';
import { createDashboard } from '../dashboard/dashboard.ts';
import type { DashboardMount } from '../dashboard/mount.ts';
import { type Clock, systemClock } from '../shared/clock.ts';
import { ApiError, ErrorCode, toApiError } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import { DEFAULT_SETTINGS, type HandlerDeps, type ManagementSettings } from './context.ts';
import type { LogSource } from './logs/types.ts';
import { openApiDocument, openApiYaml } from './openapi.ts';
import type { DeliveryReader, RunReader } from './readers.ts';
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
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;
const NO_ROUTE = 'no such route';

export function createManagementApi(deps: ManagementApiDeps): Koa & { router: Router; auth: Authenticator } {
  const settings: ManagementSettings = { ...DEFAULT_SETTINGS, ...deps.settings };
  const clock = deps.clock ?? systemClock;
  const auth = createAuthenticator({
    store: deps.store,
    settings: {
      cacheMs: settings.authCacheSeconds * 1000,
      touchIntervalMs: settings.lastUsedIntervalSeconds * 1000,
    },
    log: deps.log,
    now: () => clock.now(),
  });
  const handlerDeps: HandlerDeps = {
    store: deps.store,
    runs: deps.runs,
    deliveries: deps.deliveries,
    ...(deps.logs ? { logs: deps.logs } : {}),
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

  const app = new Koa() as Koa & { router: Router; auth: Authenticator };
  app.router = router;
  app.auth = auth;
  app.silent = true;

  app.use(async (ctx, next) => {
    const started = performance.now();
    const given = ctx.get('x-request-id');
    const requestId = REQUEST_ID.test(given) ? given : randomUUID();
    ctx.set('x-request-id', requestId);
    const log = deps.log.child({ requestId });
    ctx.state.requestId = requestId;
    ctx.state.log = log;
    try {
      if (Number(ctx.get('content-length') || 0) > settings.maxBodyBytes)
        throw new ApiError(
          ErrorCode.PayloadTooLarge,
          `request body is larger than ${settings.maxBodyBytes} bytes`,
          {
            details: { limit_bytes: settings.maxBodyBytes },
          },
        );
      await next();
      if (ctx.status === 404 && ctx.body === undefined) throw new ApiError(ErrorCode.NotFound, NO_ROUTE);
    } catch (err) {
      const e = toApiError(err);
      if (e.status >= 500) log.error({ err: e.cause ?? e, code: e.code }, 'request failed');
      ctx.status = e.status;
      ctx.body = e.toBody();
      if (e.status === 401) ctx.set('www-authenticate', 'Bearer realm="apphost"');
      if (e.status === 413) ctx.set('connection', 'close');
      if (e.retryAfter !== undefined) ctx.set('retry-after', String(e.retryAfter));
    }
    const route = typeof ctx._matchedRoute === 'string' ? ctx._matchedRoute : 'unmatched';
    const seconds = (performance.now() - started) / 1000;
    requests.inc({ method: ctx.method, route, status: String(ctx.status) });
    duration.observe({ method: ctx.method, route }, seconds);
    const principal = ctx.state.principal as Principal | undefined;
    log.info(
      {
        method: ctx.method,
        route,
        status: ctx.status,
        ms: Math.round(seconds * 1000),
        ...(principal ? { projectId: principal.projectId, serviceAccount: principal.serviceAccount } : {}),
      },
      'request',
    );
  });
  // The dashboard has its own `logs` (a stream URL); the API's log source is not it.
  const { logs: _apiLogs, ...dashboardShared } = handlerDeps;
  if (deps.dashboard)
    app.use(
      createDashboard({
        ...dashboardShared,
        log: deps.log,
        maxServiceAccountDays: settings.maxServiceAccountDays,
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
