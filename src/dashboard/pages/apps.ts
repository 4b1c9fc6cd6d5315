/** Apps: each app's runtime, replicas, in-flight calls, version, URL; an app's page with runs, logs, config. */
import type { Router } from '@koa/router';
import { stringify } from 'yaml';
import { respondWithLogFollow } from '../../management/logs/sse.ts';
import { presentLogLine } from '../../management/routes/logs.ts';
import type { AppRecord } from '../../management/store/types.ts';
import { resourceName } from '../../management/validation.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { checkSession, type PageDeps, requireSession } from '../context.ts';
import { formatLogLine } from '../format.ts';
import type { Session } from '../sessions.ts';
import { readCookie, SESSION_COOKIE } from '../web.ts';
import { appRunsTable, loadRuns } from './runs.ts';

const NOT_REPORTED = '—';

async function appView(deps: PageDeps, projectId: string, a: AppRecord) {
  const live = (await deps.liveness?.get(projectId, a.name)) ?? {};
  const ready = a.status?.readyReplicas;
  // The autoscaler writes desiredReplicas and observedConcurrency into the App's status (cluster mode).
  const desired = live.desiredReplicas ?? a.status?.desiredReplicas;
  const readyCondition = a.status?.conditions?.find((c) => c.type === 'Ready');
  const apiUrl = deps.apiUrl() ?? '{api_url}';
  const url = `${apiUrl}/v4/${projectId}/${a.name}`;
  return {
    name: a.name,
    runtime: a.spec.runtime,
    replicas: `${ready ?? NOT_REPORTED} / ${desired ?? NOT_REPORTED}`,
    inFlight: live.inFlight ?? a.status?.observedConcurrency ?? NOT_REPORTED,
    version: live.version ?? NOT_REPORTED,
    url,
    curl: `curl -X POST "${url}/run" -H "Authorization: Bearer $RUN_TOKEN" -H 'Content-Type: application/json' -d '{}'`,
    ready: readyCondition
      ? {
          status: readyCondition.status,
          label: readyCondition.status === 'True' ? 'Ready' : (readyCondition.reason ?? 'Not ready'),
        }
      : undefined,
    config: stringify(a.spec),
  };
}

export function registerAppPages(router: Router, deps: PageDeps): void {
  /** The app of the path in the session's project (404 otherwise). */
  async function appOf(session: Session, param: string | undefined): Promise<AppRecord> {
    const name = resourceName.safeParse(param ?? '');
    const apps = await deps.store.listApps(session.projectId);
    const app = name.success ? apps.find((a) => a.name === name.data) : undefined;
    if (!app) throw new ApiError(ErrorCode.NotFound, `There is no app named ${param ?? ''} in this project.`);
    return app;
  }

  router.get('dashboardApps', '/apps', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const apps = await deps.store.listApps(session.projectId);
    deps.render.page(ctx, {
      title: 'Apps',
      section: 'apps',
      session,
      template: 'apps',
      data: {
        projectId: session.projectId,
        apps: await Promise.all(apps.map((a) => appView(deps, session.projectId, a))),
      },
    });
  });

  router.get('dashboardApp', '/apps/:app', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const app = await appOf(session, ctx.params.app);
    const logs = deps.logs;
    const [view, rows, lines] = await Promise.all([
      appView(deps, session.projectId, app),
      loadRuns(deps, session.projectId, { app: app.name }, [app.name]),
      // The last lines as the page is made (without JavaScript, that is all there is).
      logs?.read(
        session.projectId,
        app.name,
        { tail: deps.settings.logTailLines },
        deps.settings.logTailLines,
      ),
    ]);
    deps.render.page(ctx, {
      title: app.name,
      section: 'apps',
      session,
      template: 'app',
      data: {
        projectId: session.projectId,
        app: view,
        runsTable: appRunsTable(deps, session, app.name, rows),
        logs: logs
          ? {
              stream: `/dashboard/apps/${app.name}/logs`,
              max: deps.settings.logTailLines,
              text: (lines ?? []).map(formatLogLine).join('\n'),
            }
          : undefined,
        baseUrl: `${ctx.protocol}://${ctx.host}`,
      },
    });
  });

  // The live tail the app page follows (EventSource, same origin, session cookie): the logs API's
  // source and bounds, ended also when the session ends, when the page goes away, or after logTailMaxMs.
  router.get('dashboardAppLogs', '/apps/:app/logs', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const app = await appOf(session, ctx.params.app);
    const logs = deps.logs;
    if (!logs) throw new ApiError(ErrorCode.NotFound, 'Logs are not available on this server.');
    const cookie = readCookie(ctx, SESSION_COOKIE) ?? '';
    const b = deps.logBounds;
    const untilSessionEnds = Date.parse(session.expiresAt) - deps.clock.now();
    const tail = Math.min(deps.settings.logTailLines, b.maxLines);
    respondWithLogFollow(ctx, {
      follow: (signal) => logs.follow(session.projectId, app.name, { tail }, signal),
      present: (l) => ({ ...presentLogLine(l), text: formatLogLine(l) }),
      maxMs: Math.max(0, Math.min(b.maxMs, deps.settings.logTailMaxMs, untilSessionEnds)),
      heartbeatMs: b.heartbeatMs,
      maxBufferedBytes: b.maxBufferedBytes,
      alive: async () => 'session' in (await checkSession(deps, cookie)),
      aliveEveryMs: deps.settings.logTailSessionCheckMs,
    });
    // Like every dashboard answer: never stored (the follow's own header says no-cache).
    ctx.set('cache-control', 'no-store');
  });
}
