/**
 * createDashboard: the browser pages at {base_url}/dashboard, as one Koa middleware the management API
 * mounts (it also redirects `/` here). Pages render on the server; htmx refreshes run tables in place.
 * Errors render as pages, never as the API's JSON.
 */
import { randomBytes } from 'node:crypto';
import { Router, type RouterContext } from '@koa/router';
import type { Context, Middleware, Next } from 'koa';
import { parseToken } from '../management/tokens.ts';
import { ApiError } from '../shared/errors.ts';
import { loadAssets } from './assets.ts';
import {
  type DashboardDeps,
  ENDED,
  type Ended,
  type PageDeps,
  readCheckedForm,
  requireSession,
} from './context.ts';
import { registerAppPages } from './pages/apps.ts';
import { registerDomainPages } from './pages/domains.ts';
import { registerKeyPages } from './pages/keys.ts';
import { registerRunPages } from './pages/runs.ts';
import { createRenderer } from './render.ts';
import {
  BASE,
  CSRF_FIELD,
  clearCookie,
  crossSite,
  FormError,
  readCookie,
  readForm,
  SESSION_COOKIE,
  SIGN_IN_CSRF_COOKIE,
  sameSecret,
  setCookie,
  setSecurityHeaders,
} from './web.ts';

export function createDashboard(deps: DashboardDeps): Middleware {
  const assets = loadAssets();
  const render = createRenderer(assets);
  const page: PageDeps = { ...deps, render };
  const router = new Router({ prefix: BASE });

  router.get('dashboardAsset', '/assets/:file', (ctx) => {
    const a = assets.byName.get(ctx.params.file ?? '');
    if (!a) return;
    ctx.type = a.type;
    ctx.set('cache-control', 'public, max-age=31536000, immutable');
    ctx.body = a.body;
  });

  router.get('dashboardHome', '/', async (ctx) => {
    if (await requireSession(ctx, deps)) ctx.redirect(`${BASE}/apps`);
  });

  function signInPage(ctx: Context, opts: { error?: string; notice?: string; status?: number }): void {
    const csrf = randomBytes(32).toString('base64url');
    setCookie(ctx, SIGN_IN_CSRF_COOKIE, csrf, { path: `${BASE}/sign-in` });
    render.page(ctx, {
      title: 'Sign in',
      template: 'signIn',
      data: { csrf, error: opts.error },
      ...(opts.notice ? { notice: opts.notice } : {}),
      ...(opts.status ? { status: opts.status } : {}),
    });
  }

  router.get('dashboardSignIn', '/sign-in', (ctx) => {
    const ended = String(ctx.query.ended ?? '');
    signInPage(ctx, ended in ENDED && ended !== 'none' ? { notice: ENDED[ended as Ended] } : {});
  });

  router.post('dashboardSignIn', '/sign-in', async (ctx) => {
    const form = await readForm(ctx, deps.settings.maxFormBytes);
    const expected = readCookie(ctx, SIGN_IN_CSRF_COOKIE);
    if (!expected || !sameSecret(form[CSRF_FIELD], expected))
      throw new FormError(
        403,
        'The sign-in form expired or was not sent from this page. Reload it and try again.',
      );
    const token = (form.token ?? '').trim();
    if (!token) return signInPage(ctx, { error: 'Paste a service-account token.', status: 422 });
    const parsed = parseToken(token);
    if (!parsed)
      return signInPage(ctx, {
        error:
          'This is not a service-account token: it starts with ahsa_ followed by the project, the name and 64 hex digits.',
        status: 422,
      });
    try {
      await deps.auth.authenticate(token);
    } catch (err) {
      if (err instanceof ApiError && err.status === 401)
        return signInPage(ctx, { error: 'This token is unknown, revoked or expired.', status: 401 });
      throw err;
    }
    const account = await deps.store.getServiceAccount(parsed.projectId, parsed.name);
    if (!account)
      return signInPage(ctx, { error: 'This token is unknown, revoked or expired.', status: 401 });
    const now = deps.clock.now();
    const expiresAt = Math.min(Date.parse(account.expiresAt), now + deps.settings.sessionMaxSeconds * 1000);
    const { cookie } = await deps.sessions.create({
      projectId: parsed.projectId,
      serviceAccount: parsed.name,
      tokenHash: account.secretHash,
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(expiresAt).toISOString(),
    });
    ctx.state.principal = { projectId: parsed.projectId, serviceAccount: parsed.name };
    clearCookie(ctx, SIGN_IN_CSRF_COOKIE, `${BASE}/sign-in`);
    setCookie(ctx, SESSION_COOKIE, cookie, { expires: new Date(expiresAt) });
    ctx.redirect(`${BASE}/apps`);
    ctx.status = 303;
  });

  router.post('dashboardSignOut', '/sign-out', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    await readCheckedForm(ctx, deps, session);
    const cookie = readCookie(ctx, SESSION_COOKIE);
    if (cookie) await deps.sessions.end(cookie);
    clearCookie(ctx, SESSION_COOKIE);
    ctx.redirect(`${BASE}/sign-in?ended=signed-out`);
    ctx.status = 303;
  });

  registerKeyPages(router, page);
  registerAppPages(router, page);
  registerRunPages(router, page);
  registerDomainPages(router, page);

  const routes = router.routes();
  const allowed = router.allowedMethods();
  const errorPage = (ctx: Context, status: number, title: string, message: string) =>
    render.page(ctx, { title, template: 'error', data: { title, message, back: BASE }, status });

  return async (ctx: Context, next: Next) => {
    if (ctx.path === '/' && (ctx.method === 'GET' || ctx.method === 'HEAD')) {
      ctx.redirect(BASE);
      return;
    }
    if (ctx.path !== BASE && !ctx.path.startsWith(`${BASE}/`)) return next();
    setSecurityHeaders(ctx);
    // Pages hold project data and one-time tokens: never stored by a browser or a proxy.
    ctx.set('cache-control', 'no-store');
    try {
      if (ctx.method !== 'GET' && ctx.method !== 'HEAD' && crossSite(ctx))
        throw new FormError(403, 'Requests from other sites are refused.');
      const rctx = ctx as RouterContext;
      await routes(rctx, () => allowed(rctx, async () => {}));
      if (ctx.status === 405) errorPage(ctx, 405, 'Not allowed', 'This page does not accept that method.');
      else if (ctx.body === undefined && ctx.status === 404)
        errorPage(ctx, 404, 'Not found', 'There is no such page.');
    } catch (err) {
      if (err instanceof FormError) {
        errorPage(ctx, err.status, err.status === 403 ? 'Refused' : 'Not accepted', err.message);
        if (err.status === 413) ctx.set('connection', 'close');
        return;
      }
      const e = err instanceof ApiError ? err : undefined;
      if (e && e.status < 500) return errorPage(ctx, e.status, 'Not found', e.message);
      (ctx.state.log ?? deps.log).error({ err }, 'dashboard page failed');
      errorPage(
        ctx,
        e?.status ?? 500,
        'Something went wrong',
        e?.status === 504
          ? 'The backend did not answer in time. Try again in a moment.'
          : 'The page could not be shown. Try again; if it keeps failing, the management API log has the details.',
      );
    }
  };
}
