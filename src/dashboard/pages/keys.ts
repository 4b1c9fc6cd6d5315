/** API Keys: list service accounts, create one (token shown once), rotate, revoke (with confirmation). */
import type { Router, RouterContext } from '@koa/router';
import { z } from 'zod';
import { createServiceAccount, rotateServiceAccount } from '../../management/service-accounts.ts';
import { expiry, serviceAccountName, toDate } from '../../management/validation.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { type PageDeps, readCheckedForm, requireSession } from '../context.ts';
import { formatDate, formatTime, tomorrow } from '../format.ts';
import { checkForm, type FieldErrors } from '../forms.ts';
import type { Session } from '../sessions.ts';
import { isHttps } from '../web.ts';

const nameField = z.string().trim().min(1, 'Give the key a name.').pipe(serviceAccountName);
const expiryField = z.string().trim().min(1, 'Choose the date the key expires.').pipe(expiry);
const createForm = z.object({ name: nameField, expires_at: expiryField });
const rotateForm = z.object({ expires_at: expiryField });

const NOTICES: Record<string, (name: string) => string> = {
  revoked: (n) => `Key ${n} is revoked: its token is refused from now on.`,
};

/** The service-account rules' refusal of an expiry, in the form's words. */
function expiryMessage(err: ApiError): string {
  const days = err.details?.maxDays;
  return typeof days === 'number'
    ? `The key may live at most ${days} days: choose an earlier date.`
    : 'The expiry date must be in the future.';
}

export function registerKeyPages(router: Router, deps: PageDeps): void {
  const { store, render } = deps;
  const now = () => deps.clock.now();

  async function listPage(
    ctx: RouterContext,
    session: Session,
    opts: { form?: Record<string, string>; errors?: FieldErrors; status?: number; notice?: string } = {},
  ) {
    const t = now();
    const accounts = (await store.listServiceAccounts(session.projectId)).map((a) => {
      const expired = !(t < Date.parse(a.expiresAt));
      return {
        ...a,
        created: formatTime(a.createdAt),
        expires: formatTime(a.expiresAt),
        lastUsed: formatTime(a.lastUsedAt),
        state: expired ? 'expired' : 'active',
        stateClass: expired ? 'False' : 'True',
        current: a.name === session.serviceAccount,
      };
    });
    render.page(ctx, {
      title: 'API Keys',
      section: 'keys',
      session,
      template: 'keys',
      data: {
        projectId: session.projectId,
        csrf: session.csrf,
        accounts,
        form: { name: '', expires_at: '', ...opts.form },
        errors: opts.errors ?? {},
        minDate: tomorrow(t),
        maxDate: new Date(t + deps.maxServiceAccountDays * 86_400_000).toISOString().slice(0, 10),
      },
      ...(opts.notice ? { notice: opts.notice } : {}),
      ...(opts.status ? { status: opts.status } : {}),
    });
  }

  function tokenPage(
    ctx: RouterContext,
    session: Session,
    heading: string,
    name: string,
    expiresAt: string,
    token: string,
  ) {
    const origin = `${isHttps(ctx) ? 'https' : 'http'}://${ctx.host}`;
    render.page(ctx, {
      title: heading,
      section: 'keys',
      session,
      template: 'keyToken',
      data: {
        heading,
        name,
        projectId: session.projectId,
        expiresAt,
        expires: formatTime(expiresAt),
        token,
        baseUrl: origin,
      },
      status: 201,
    });
  }

  router.get('dashboardKeys', '/keys', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const notice = NOTICES[String(ctx.query.notice ?? '')]?.(String(ctx.query.name ?? ''));
    await listPage(ctx, session, notice ? { notice } : {});
  });

  router.post('dashboardCreateKey', '/keys', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const form = await readCheckedForm(ctx, deps, session);
    const shown = { name: form.name ?? '', expires_at: form.expires_at ?? '' };
    const checked = checkForm(createForm, shown);
    if (!checked.ok) return listPage(ctx, session, { form: shown, errors: checked.errors, status: 422 });
    try {
      const { account, token } = await createServiceAccount(
        store,
        session.projectId,
        checked.value.name,
        toDate(checked.value.expires_at),
        new Date(now()),
        { maxDays: deps.maxServiceAccountDays },
      );
      tokenPage(ctx, session, 'Key created', account.name, account.expiresAt, token);
    } catch (err) {
      if (!(err instanceof ApiError) || (err.status !== 409 && err.status !== 422)) throw err;
      const errors: FieldErrors =
        err.status === 409
          ? { name: `A key named ${checked.value.name} already exists: choose another name.` }
          : { expires_at: expiryMessage(err) };
      return listPage(ctx, session, { form: shown, errors, status: err.status });
    }
  });

  const accountParam = (ctx: RouterContext) => {
    const r = serviceAccountName.safeParse(ctx.params.name ?? '');
    return r.success ? r.data : undefined;
  };

  async function confirmPage(
    ctx: RouterContext,
    session: Session,
    kind: 'revoke' | 'rotate',
    name: string,
    opts: { value?: string; error?: string; status?: number } = {},
  ) {
    const account = await store.getServiceAccount(session.projectId, name);
    if (!account) throw new ApiError(ErrorCode.NotFound, `There is no key named ${name}.`);
    const self =
      name === session.serviceAccount ? ' You are signed in with this key: this ends your session.' : '';
    render.page(ctx, {
      title: kind === 'revoke' ? `Revoke ${name}?` : `Rotate ${name}?`,
      section: 'keys',
      session,
      template: 'confirm',
      status: opts.status ?? 200,
      data:
        kind === 'revoke'
          ? {
              title: `Revoke key ${name}?`,
              message: `Its token is refused from the next request on, and every dashboard session signed in with it ends.${self} This cannot be undone.`,
              action: `/dashboard/keys/${name}/revoke`,
              csrf: session.csrf,
              hidden: {},
              confirm: `Revoke ${name}`,
              danger: true,
              back: '/dashboard/keys',
            }
          : {
              title: `Rotate key ${name}?`,
              message: `A new token is issued and shown once; the current token is refused from then on.${self}`,
              action: `/dashboard/keys/${name}/rotate`,
              csrf: session.csrf,
              hidden: {},
              field: {
                name: 'expires_at',
                label: 'New token expires on',
                type: 'date',
                value: opts.value ?? formatDate(account.expiresAt),
                min: tomorrow(now()),
                error: opts.error,
              },
              confirm: `Rotate ${name}`,
              danger: false,
              back: '/dashboard/keys',
            },
    });
  }

  for (const kind of ['revoke', 'rotate'] as const) {
    router.get(`dashboard-${kind}-key`, `/keys/:name/${kind}`, async (ctx) => {
      const session = await requireSession(ctx, deps);
      if (!session) return;
      const name = accountParam(ctx);
      if (!name) throw new ApiError(ErrorCode.NotFound, 'There is no such key.');
      await confirmPage(ctx, session, kind, name);
    });
  }

  router.post('dashboardRevokeKey', '/keys/:name/revoke', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    await readCheckedForm(ctx, deps, session);
    const name = accountParam(ctx);
    if (!name || !(await store.revokeServiceAccount(session.projectId, name)))
      throw new ApiError(ErrorCode.NotFound, `There is no key named ${name ?? ''}.`);
    deps.auth.forget(session.projectId, name);
    await deps.sessions.endAll(session.projectId, name);
    ctx.redirect(`/dashboard/keys?notice=revoked&name=${name}`);
    ctx.status = 303;
  });

  router.post('dashboardRotateKey', '/keys/:name/rotate', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const form = await readCheckedForm(ctx, deps, session);
    const name = accountParam(ctx);
    if (!name) throw new ApiError(ErrorCode.NotFound, 'There is no such key.');
    const value = form.expires_at ?? '';
    const checked = checkForm(rotateForm, { expires_at: value });
    if (!checked.ok)
      return confirmPage(ctx, session, 'rotate', name, {
        value,
        error: checked.errors.expires_at,
        status: 422,
      });
    try {
      const { account, token } = await rotateServiceAccount(
        store,
        deps.auth,
        session.projectId,
        name,
        toDate(checked.value.expires_at),
        new Date(now()),
        { maxDays: deps.maxServiceAccountDays },
      );
      await deps.sessions.endAll(session.projectId, name);
      tokenPage(ctx, session, 'Key rotated', account.name, account.expiresAt, token);
    } catch (err) {
      if (err instanceof ApiError && err.status === 422)
        return confirmPage(ctx, session, 'rotate', name, {
          value,
          error: expiryMessage(err),
          status: 422,
        });
      throw err;
    }
  });
}
