/** Domains: hostname, assigned app and routing status; add, assign and unassign (with confirmation). */
import type { Router, RouterContext } from '@koa/router';
import { z } from 'zod';
import { assignDomainToApp } from '../../management/domains.ts';
import { domainIdFor } from '../../management/routes/domains.ts';
import { createDomainBody, resourceName } from '../../management/validation.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { type PageDeps, readCheckedForm, requireSession } from '../context.ts';
import { checkForm, type FieldErrors } from '../forms.ts';
import type { Session } from '../sessions.ts';

const addForm = z.object({
  hostname: z
    .string()
    .trim()
    .min(1, 'Enter a hostname, e.g. api.example.com.')
    .pipe(createDomainBody.shape.hostname),
  domain_id: z
    .string()
    .trim()
    .transform((v) => (v === '' ? undefined : v))
    .pipe(resourceName.optional()),
});

const NOTICES: Record<string, (id: string, app: string) => string> = {
  added: (id) => `Domain ${id} added. Assign it to an app to route its traffic.`,
  assigned: (id, app) => `Domain ${id} now routes to ${app}.`,
  unassigned: (id) => `Domain ${id} is unassigned: its hostname no longer reaches any app.`,
};

export function registerDomainPages(router: Router, deps: PageDeps): void {
  const { store, render } = deps;

  async function listPage(
    ctx: RouterContext,
    session: Session,
    opts: { form?: Record<string, string>; errors?: FieldErrors; status?: number; notice?: string } = {},
  ) {
    const [domains, apps] = await Promise.all([
      store.listDomains(session.projectId),
      store.listApps(session.projectId),
    ]);
    render.page(ctx, {
      title: 'Domains',
      section: 'domains',
      session,
      template: 'domains',
      data: {
        projectId: session.projectId,
        csrf: session.csrf,
        apps: apps.map((a) => a.name),
        domains: domains.map((d) => ({
          ...d,
          status: d.status
            ? {
                status: d.status.status,
                reason: d.status.reason ?? d.status.status,
                message: d.status.message ?? '',
              }
            : { status: 'Unknown', reason: 'Unknown', message: '' },
        })),
        form: { hostname: '', domain_id: '', ...opts.form },
        errors: opts.errors ?? {},
      },
      ...(opts.notice ? { notice: opts.notice } : {}),
      ...(opts.status ? { status: opts.status } : {}),
    });
  }

  router.get('dashboardDomains', '/domains', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const notice = NOTICES[String(ctx.query.notice ?? '')]?.(
      String(ctx.query.id ?? ''),
      String(ctx.query.app ?? ''),
    );
    await listPage(ctx, session, notice ? { notice } : {});
  });

  router.post('dashboardAddDomain', '/domains', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const form = await readCheckedForm(ctx, deps, session);
    const shown = { hostname: form.hostname ?? '', domain_id: form.domain_id ?? '' };
    const checked = checkForm(addForm, shown);
    if (!checked.ok) return listPage(ctx, session, { form: shown, errors: checked.errors, status: 422 });
    const id = checked.value.domain_id ?? domainIdFor(checked.value.hostname);
    try {
      await store.createDomain(session.projectId, { domainId: id, hostname: checked.value.hostname });
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 409) throw err;
      const errors: FieldErrors = /hostname/.test(err.message)
        ? { hostname: `${checked.value.hostname} is already in use.` }
        : { domain_id: `A domain with id ${id} already exists: choose another id.` };
      return listPage(ctx, session, { form: shown, errors, status: 409 });
    }
    ctx.redirect(`/dashboard/domains?notice=added&id=${id}`);
    ctx.status = 303;
  });

  const domainParam = async (ctx: RouterContext, session: Session) => {
    const id = resourceName.safeParse(ctx.params.id ?? '');
    const d = id.success ? await store.getDomain(session.projectId, id.data) : undefined;
    if (!d)
      throw new ApiError(ErrorCode.NotFound, `There is no domain ${ctx.params.id ?? ''} in this project.`);
    return d;
  };

  router.get('dashboardAssignDomain', '/domains/:id/assign', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const d = await domainParam(ctx, session);
    const app = resourceName.safeParse(String(ctx.query.app ?? ''));
    if (!app.success || !(await store.appExists(session.projectId, app.data)))
      throw new ApiError(
        ErrorCode.NotFound,
        `There is no app ${String(ctx.query.app ?? '')} in this project.`,
      );
    const replaces = d.appName && d.appName !== app.data ? ` It stops routing to ${d.appName}.` : '';
    render.page(ctx, {
      title: `Assign ${d.hostname}?`,
      section: 'domains',
      session,
      template: 'confirm',
      data: {
        title: `Assign ${d.hostname} to ${app.data}?`,
        message: `Calls to ${d.hostname} will reach app ${app.data}.${replaces}`,
        action: `/dashboard/domains/${d.domainId}/assign`,
        csrf: session.csrf,
        hidden: { app: app.data },
        confirm: `Assign to ${app.data}`,
        danger: false,
        back: '/dashboard/domains',
      },
    });
  });

  router.post('dashboardAssignDomain', '/domains/:id/assign', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const form = await readCheckedForm(ctx, deps, session);
    const d = await domainParam(ctx, session);
    const app = resourceName.safeParse(form.app ?? '');
    if (!app.success) throw new ApiError(ErrorCode.NotFound, 'There is no such app in this project.');
    try {
      await assignDomainToApp(store, session.projectId, d.domainId, app.data);
    } catch (err) {
      if (err instanceof ApiError && err.status === 422)
        throw new ApiError(ErrorCode.NotFound, `There is no app ${app.data} in this project.`);
      throw err;
    }
    ctx.redirect(`/dashboard/domains?notice=assigned&id=${d.domainId}&app=${app.data}`);
    ctx.status = 303;
  });

  router.get('dashboardUnassignDomain', '/domains/:id/unassign', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const d = await domainParam(ctx, session);
    render.page(ctx, {
      title: `Unassign ${d.hostname}?`,
      section: 'domains',
      session,
      template: 'confirm',
      data: {
        title: `Unassign ${d.hostname}?`,
        message: d.appName
          ? `Calls to ${d.hostname} stop reaching app ${d.appName} and are answered 404. The domain stays, so you can assign it again.`
          : `${d.hostname} is not assigned to any app.`,
        action: `/dashboard/domains/${d.domainId}/unassign`,
        csrf: session.csrf,
        hidden: {},
        confirm: 'Unassign',
        danger: true,
        back: '/dashboard/domains',
      },
    });
  });

  router.post('dashboardUnassignDomain', '/domains/:id/unassign', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    await readCheckedForm(ctx, deps, session);
    const d = await domainParam(ctx, session);
    await store.unassignDomain(session.projectId, d.domainId);
    ctx.redirect(`/dashboard/domains?notice=unassigned&id=${d.domainId}`);
    ctx.status = 303;
  });
}
