/** Apps: each app's runtime, replicas, in-flight calls, version, URL; an app's page with runs, logs, config. */
import type { Router } from '@koa/router';
import { stringify } from 'yaml';
import type { AppRecord } from '../../management/store/types.ts';
import { resourceName } from '../../management/validation.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { type PageDeps, requireSession } from '../context.ts';
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
    const name = resourceName.safeParse(ctx.params.app ?? '');
    const apps = await deps.store.listApps(session.projectId);
    const app = name.success ? apps.find((a) => a.name === name.data) : undefined;
    if (!app)
      throw new ApiError(
        ErrorCode.NotFound,
        `There is no app named ${ctx.params.app ?? ''} in this project.`,
      );
    const view = await appView(deps, session.projectId, app);
    const rows = await loadRuns(deps, session.projectId, { app: app.name }, [app.name]);
    const runs = appRunsTable(deps, session, app.name, rows);
    deps.render.page(ctx, {
      title: app.name,
      section: 'apps',
      session,
      template: 'app',
      data: {
        projectId: session.projectId,
        app: view,
        runsTable: runs,
        logs: deps.logs?.url(session.projectId, app.name),
        baseUrl: `${ctx.protocol}://${ctx.host}`,
      },
    });
  });
}
