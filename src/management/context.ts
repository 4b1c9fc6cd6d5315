/** What every route handler gets: the dependencies and the per-request project scope check. */
import type { RouterContext } from '@koa/router';
import type { Clock } from '../shared/clock.ts';
import { ApiError, ErrorCode } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import type { DeployApi } from './deploy-api.ts';
import type { LogSource } from './logs/types.ts';
import type { DeliveryReader, RunReader } from './readers.ts';
import type { Authenticator } from './service-accounts.ts';
import type { ManagementStore } from './store/types.ts';
import { parseOrThrow, projectId as projectIdSchema } from './validation.ts';

export interface ManagementSettings {
  /** Largest request body accepted; larger → 413. */
  maxBodyBytes: number;
  /** How long a verified service-account token is trusted without re-reading the store. */
  authCacheMs: number;
  /** Minimum time between last-used writes for one service account. */
  lastUsedIntervalMs: number;
  /** Longest lifetime a run token may be issued for. */
  maxRunTokenDays: number;
  /** Longest lifetime a service-account token may be created with. */
  maxServiceAccountDays: number;
  /** Age a rotated run-token key must reach before it signs (its way to the gateway's mounted Secret). */
  runTokenKeyActivationMs: number;
  /** Most log lines one logs request returns (and the default `tail`). */
  logsMaxLines: number;
  /** Longest a log follow runs before the server ends it (the client may follow again). */
  logsFollowMaxMs: number;
  /** Bytes of log events waiting for a slow follower before the server ends its follow. */
  logsMaxBufferedBytes: number;
  /** Interval of keep-alive comments on a quiet follow. */
  logsHeartbeatMs: number;
  /** Longest a build-log follow runs before the server ends it (the client may follow again). */
  buildLogFollowMaxMs: number;
}

export const DEFAULT_SETTINGS: ManagementSettings = {
  maxBodyBytes: 64 * 1024,
  authCacheMs: 3_000,
  lastUsedIntervalMs: 60_000,
  maxRunTokenDays: 366,
  maxServiceAccountDays: 366,
  runTokenKeyActivationMs: 120_000,
  logsMaxLines: 1_000,
  logsFollowMaxMs: 3_600_000,
  logsMaxBufferedBytes: 1024 * 1024,
  logsHeartbeatMs: 15_000,
  buildLogFollowMaxMs: 3_600_000,
};

export interface HandlerDeps {
  store: ManagementStore;
  runs: RunReader;
  deliveries: DeliveryReader;
  /** An app's log lines; absent where the server has no access to them. */
  logs?: LogSource;
  /** Deploys (apps and builds routes); absent where the server cannot deploy. */
  deploy?: DeployApi;
  auth: Authenticator;
  clock: Clock;
  settings: ManagementSettings;
}

export interface RequestState {
  requestId: string;
  log: Logger;
}

const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;

/**
 * Authenticates the caller and checks the path's project: no/invalid/expired/revoked token → 401.
 * A token is valid for its own project only; any other project in the path → 404, the same answer
 * as for a project that does not exist, so a token cannot probe which projects exist.
 */
export async function projectScope(ctx: RouterContext, deps: HandlerDeps): Promise<string> {
  const m = BEARER.exec(ctx.get('authorization'));
  if (!m?.[1])
    throw new ApiError(
      ErrorCode.Unauthenticated,
      'missing bearer token (Authorization: Bearer <SERVICE_ACCOUNT_TOKEN>)',
    );
  const principal = await deps.auth.authenticate(m[1]);
  // For the access log: who acted (never the token).
  ctx.state.principal = principal;
  const pathProject = ctx.params.project_id ?? '';
  const notFound = () => new ApiError(ErrorCode.NotFound, `project ${pathProject.slice(0, 63)} not found`);
  if (principal.projectId !== pathProject) throw notFound();
  const projectId = parseOrThrow(projectIdSchema, pathProject, 'project_id');
  if (!(await deps.store.projectExists(projectId))) throw notFound();
  return projectId;
}

export function param(ctx: RouterContext, name: string): string {
  return ctx.params[name] ?? '';
}
