/** Apps: each app's runtime, replicas, in-flight calls, version, URL; an app's page with runs, logs, config. */
import type { Router } from '@koa/router';
import { stringify } from 'yaml';
import type { DeployApi } from '../../management/deploy-api.ts';
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

/** An app as the deploy target (the apps routes') sees it. */
type DeployedApp = Awaited<ReturnType<DeployApi['target']['list']>>[number];

/** `sha256:0123456789ab…`: enough to tell versions apart on a page (the full digest is in its title). */
export const shortDigest = (d: string) => (d.length > 19 ? `${d.slice(0, 19)}…` : d);

/**
 * What runs: the build that deployed it (apphost deploy, or apphost dev's folder deploys) and its
 * bundle and dependency set; for an App applied by hand, the bundle its spec names, if any.
 */
export function versionOf(a: AppRecord, deployed: DeployedApp | undefined) {
  const bundle = deployed?.bundle ?? a.spec.code?.artifacts?.bundle;
  const dependencies = deployed?.dependencies ?? a.spec.code?.artifacts?.dependencies;
  const buildId = deployed?.buildId;
  return {
    label: buildId ?? (bundle ? shortDigest(bundle) : NOT_REPORTED),
    buildId,
    bundle,
    dependencies,
  };
}

async function appView(deps: PageDeps, projectId: string, a: AppRecord, deployed: DeployedApp | undefined) {
  const live = (await deps.liveness?.get(projectId, a.name)) ?? {};
  // Deployed apps: the deploy target's view (as GET /apps/{app} shows it); else the App status the
  // operator and the autoscaler write (readyReplicas, desiredReplicas, observedConcurrency).
  const ready = deployed?.readyReplicas ?? live.readyReplicas ?? a.status?.readyReplicas;
  const desired = deployed?.desiredReplicas ?? live.desiredReplicas ?? a.status?.desiredReplicas;
  const inFlight = live.inFlight ?? a.status?.observedConcurrency;
  const readyCondition = a.status?.conditions?.find((c) => c.type === 'Ready');
  const apiUrl = deps.apiUrl() ?? '{api_url}';
  const url = `${apiUrl}/v4/${projectId}/${a.name}`;
  return {
    name: a.name,
    runtime: a.spec.runtime,
    replicas: `${ready ?? NOT_REPORTED} / ${desired ?? NOT_REPORTED}`,
    inFlight:
      inFlight === undefined ? NOT_REPORTED : `${inFlight}${live.queued ? ` (+${live.queued} waiting)` : ''}`,
    version: versionOf(a, deployed),
    url,
    curl: `curl -X POST "${url}/run" -H "Authorization: Bearer $RUN_TOKEN" -H 'Content-Type: application/json' -d '{}'`,
    ready: readyCondition
      ? {
          status: readyCondition.status,
          label: readyCondition.status === 'True' ? 'Ready' : (readyCondition.reason ?? 'Not ready'),
        }
      : deployed
        ? {
            status: deployed.ready ? 'True' : 'False',
            label: deployed.ready ? 'Ready' : (deployed.message ?? 'Not ready'),
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
    const [apps, deployed] = await Promise.all([
      deps.store.listApps(session.projectId),
      deps.deploy ? deps.deploy.target.list(session.projectId) : [],
    ]);
    const byName = new Map(deployed.map((d) => [d.name, d]));
    deps.render.page(ctx, {
      title: 'Apps',
      section: 'apps',
      session,
      template: 'apps',
      data: {
        projectId: session.projectId,
        apps: await Promise.all(apps.map((a) => appView(deps, session.projectId, a, byName.get(a.name)))),
      },
    });
  });

  router.get('dashboardApp', '/apps/:app', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const app = await appOf(session, ctx.params.app);
    const logs = deps.logs;
    const deployed = await deps.deploy?.target.get(session.projectId, app.name);
    const [view, rows, lines] = await Promise.all([
      appView(deps, session.projectId, app, deployed),
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
