/** What every dashboard page handler gets, and the per-request guards (session, CSRF). */
import type { RouterContext } from '@koa/router';
import type { Context } from 'koa';
import type { DeployApi } from '../management/deploy-api.ts';
import type { LogSource } from '../management/logs/types.ts';
import type { DeliveryReader, RunReader } from '../management/readers.ts';
import type { Authenticator } from '../management/service-accounts.ts';
import type { ManagementStore } from '../management/store/types.ts';
import type { Clock } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import type { Renderer } from './render.ts';
import type { Session, SessionStore } from './sessions.ts';
import type { DashboardSettings } from './settings.ts';
import {
  BASE,
  CSRF_FIELD,
  clearCookie,
  FormError,
  readCookie,
  readForm,
  SESSION_COOKIE,
  sameSecret,
} from './web.ts';

/**
 * Live figures of an app this process knows and its App status may not carry (local mode: the
 * in-process gateway's balancer). Cluster figures come from the App's status and the deploy target.
 */
export interface AppLiveness {
  get(
    projectId: string,
    appName: string,
  ): Promise<{ inFlight?: number; queued?: number; readyReplicas?: number; desiredReplicas?: number }>;
}

/** Bounds of a live log tail (the logs API's: APPHOST_MANAGEMENT_LOGS_*). */
export interface LogFollowBounds {
  maxMs: number;
  heartbeatMs: number;
  maxBufferedBytes: number;
  maxLines: number;
}

export interface DashboardDeps {
  store: ManagementStore;
  runs: RunReader;
  deliveries: DeliveryReader;
  auth: Authenticator;
  sessions: SessionStore;
  clock: Clock;
  log: Logger;
  settings: DashboardSettings;
  /** Longest service-account lifetime (the management API's APPHOST_MANAGEMENT_MAX_SERVICE_ACCOUNT_DAYS). */
  maxServiceAccountDays: number;
  /** The public {api_url}, when known (for app URLs and curl lines). */
  apiUrl: () => string | undefined;
  liveness?: AppLiveness;
  /** Deployed versions (the apps routes' target): build, bundle, replicas; absent where there are none. */
  deploy?: DeployApi;
  /** The apps' log lines (the logs API's source); no live tail when absent. */
  logs?: LogSource;
  logBounds: LogFollowBounds;
}

export interface PageDeps extends DashboardDeps {
  render: Renderer;
}

/** Why a sign-in page is shown instead of the page asked for. */
export const ENDED = {
  none: 'Sign in to continue.',
  expired: 'Your session has ended: the token expired or the session reached its time limit. Sign in again.',
  revoked: 'Your session has ended: its token was revoked or rotated. Sign in with a valid token.',
  'signed-out': 'You are signed out.',
} as const;
export type Ended = keyof typeof ENDED;

function toSignIn(ctx: Context, why: Ended): void {
  const to = `${BASE}/sign-in${why === 'none' ? '' : `?ended=${why}`}`;
  if (ctx.get('hx-request') === 'true') {
    // htmx follows redirects inside fetch and would swap the sign-in page into a fragment.
    ctx.status = 200;
    ctx.set('hx-redirect', to);
    ctx.body = '';
    return;
  }
  ctx.redirect(to);
  ctx.status = 303;
}

/**
 * Whether the session of `cookie` still holds: it exists, has not expired, and its service account
 * still has the token it was signed in with and has not expired. Re-read every time (no cache), so a
 * revoked, rotated or expired token ends its sessions at once on every replica.
 */
export async function checkSession(
  deps: DashboardDeps,
  cookie: string,
): Promise<{ session: Session } | { ended: Ended }> {
  const session = await deps.sessions.get(cookie);
  if (!session) return { ended: 'none' };
  const now = deps.clock.now();
  if (!(now < Date.parse(session.expiresAt))) return { ended: 'expired' };
  const account = await deps.store.getServiceAccount(session.projectId, session.serviceAccount);
  if (!account || !sameSecret(account.secretHash, session.tokenHash)) return { ended: 'revoked' };
  if (!(now < Date.parse(account.expiresAt))) return { ended: 'expired' };
  return { session };
}

/** The caller's session (checkSession); redirects to sign-in and returns undefined otherwise. */
export async function requireSession(ctx: RouterContext, deps: DashboardDeps): Promise<Session | undefined> {
  const cookie = readCookie(ctx, SESSION_COOKIE);
  const state = cookie ? await checkSession(deps, cookie) : { ended: 'none' as const };
  if ('ended' in state) {
    if (cookie && state.ended !== 'none') await deps.sessions.end(cookie);
    if (cookie) clearCookie(ctx, SESSION_COOKIE);
    toSignIn(ctx, state.ended);
    return undefined;
  }
  ctx.state.principal = { projectId: state.session.projectId, serviceAccount: state.session.serviceAccount };
  return state.session;
}

/** The posted form, after its CSRF token was checked (403 otherwise). */
export async function readCheckedForm(
  ctx: RouterContext,
  deps: DashboardDeps,
  session: Session,
): Promise<Record<string, string>> {
  const form = await readForm(ctx, deps.settings.maxFormBytes);
  if (!sameSecret(form[CSRF_FIELD], session.csrf))
    throw new FormError(
      403,
      'The form was missing its security token or it did not match. Reload the page and try again.',
    );
  return form;
}

/** A same-site path to go back to after a form (never an absolute URL from the form). */
export function backPath(value: string | undefined, fallback: string): string {
  return value && /^\/dashboard(\/[A-Za-z0-9._~\-/]*)?(\?[A-Za-z0-9._~\-=&%]*)?$/.test(value)
    ? value
    : fallback;
}
