/** Runs: filter by app, state and mode; a run's page with its webhook attempts; cancel. */
import type { Router, RouterContext } from '@koa/router';
import { resourceName, runId as runIdSchema } from '../../management/validation.ts';
import { type RunRecord, type RunState, RunState as RunStates } from '../../shared/contracts/messaging.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { SYNC_CALLS_PER_APP } from '../../shared/nats/jetstream.ts';
import { backPath, type PageDeps, readCheckedForm, requireSession } from '../context.ts';
import { RUN_MODES, type RunMode, type RunRow, resultView, runMode, runRow } from '../runs-view.ts';
import type { Session } from '../sessions.ts';

const STATES = Object.values(RunStates) as RunState[];

export interface RunFilter {
  app?: string;
  state?: RunState;
  mode?: RunMode;
}

/** Newest runs of the project (one app or all), with webhook deliveries. */
export async function loadRuns(
  deps: PageDeps,
  projectId: string,
  filter: RunFilter,
  apps: string[],
): Promise<RunRow[]> {
  const limit = deps.settings.runsPageSize;
  const names = filter.app ? [filter.app] : apps;
  const lists = await Promise.all(
    names.map((a) =>
      deps.runs.list(projectId, a, {
        ...(filter.state ? { state: filter.state } : {}),
        ...(filter.mode ? { mode: filter.mode } : {}),
        limit,
      }),
    ),
  );
  const records = lists
    .flat()
    .filter((r) => !filter.mode || runMode(r) === filter.mode)
    .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0))
    .slice(0, limit);
  const now = deps.clock.now();
  return Promise.all(
    records.map(async (r) => {
      // Deliveries are keyed by request id alone: only this project's are shown.
      const d = r.webhookHost ? await deps.deliveries.get(r.runId) : undefined;
      return runRow(r, d?.projectId === projectId ? d : undefined, {
        now,
        maxResultBytes: deps.settings.maxResultBytes,
      });
    }),
  );
}

function parseFilter(q: Record<string, unknown>, apps: string[]): { filter: RunFilter; error?: string } {
  const filter: RunFilter = {};
  const app = typeof q.app === 'string' ? q.app : '';
  const state = typeof q.state === 'string' ? q.state : '';
  const mode = typeof q.mode === 'string' ? q.mode : '';
  const problems: string[] = [];
  if (app) {
    if (apps.includes(app)) filter.app = app;
    else problems.push(`there is no app named ${app}`);
  }
  if (state) {
    if (STATES.includes(state as RunState)) filter.state = state as RunState;
    else problems.push(`unknown state ${state}`);
  }
  if (mode) {
    if (RUN_MODES.includes(mode as RunMode)) filter.mode = mode as RunMode;
    else problems.push(`unknown mode ${mode}`);
  }
  return problems.length
    ? { filter, error: `Filter not applied in part: ${problems.join('; ')}.` }
    : { filter };
}

function query(filter: RunFilter): string {
  const q = new URLSearchParams();
  if (filter.app) q.set('app', filter.app);
  if (filter.state) q.set('state', filter.state);
  if (filter.mode) q.set('mode', filter.mode);
  const s = q.toString();
  return s ? `?${s}` : '';
}

export function runsTable(
  deps: PageDeps,
  session: Session,
  rows: RunRow[],
  opts: {
    refreshUrl: string;
    back: string;
    caption: string;
    emptyTitle: string;
    emptyHint: string;
    curl?: string;
  },
): string {
  return deps.render.fragment('runsTable', {
    ...opts,
    runs: rows,
    csrf: session.csrf,
    live: rows.some((r) => !r.terminal || r.awaitingWebhook),
    refreshSeconds: deps.settings.refreshSeconds,
  });
}

/** The latest runs of one app, for its page. */
export const APP_PAGE_RUNS = 10;
export function appRunsTable(deps: PageDeps, session: Session, app: string, rows: RunRow[]): string {
  return runsTable(deps, session, rows.slice(0, APP_PAGE_RUNS), {
    refreshUrl: `/dashboard/runs/table?app=${app}&view=app`,
    back: `/dashboard/apps/${app}`,
    caption: `Latest ${APP_PAGE_RUNS} runs of this app`,
    emptyTitle: 'No runs of this app yet.',
    emptyHint:
      'Call one of its functions: a sync call shows up here once it is answered; with ?async=true it is queued and shows up at once, with its state.',
  });
}

export function registerRunPages(router: Router, deps: PageDeps): void {
  const listApps = async (projectId: string) => (await deps.store.listApps(projectId)).map((a) => a.name);

  async function table(ctx: RouterContext, session: Session) {
    const apps = await listApps(session.projectId);
    const { filter, error } = parseFilter(ctx.query, apps);
    const rows = await loadRuns(deps, session.projectId, filter, apps);
    // The app page shows a short table of one app; it refreshes itself through the same route.
    if (ctx.query.view === 'app' && filter.app)
      return { apps, filter, error, html: appRunsTable(deps, session, filter.app, rows) };
    const filtered = Boolean(filter.app || filter.state || filter.mode);
    const html = runsTable(deps, session, rows, {
      refreshUrl: `/dashboard/runs/table${query(filter)}`,
      back: `/dashboard/runs${query(filter)}`,
      caption: `Newest ${deps.settings.runsPageSize} runs at most`,
      emptyTitle: filtered ? 'No run matches this filter.' : 'No runs yet.',
      emptyHint: filtered
        ? 'Clear the filter to see every run.'
        : 'Call a function: a sync call shows up here once it is answered; with ?async=true it answers 202 with a run_id at once and the run appears here with its state.',
      ...(filtered
        ? {}
        : {
            curl: `curl -X POST "${deps.apiUrl() ?? '{api_url}'}/v4/${session.projectId}/<app>/<function>?async=true" -H "Authorization: Bearer $RUN_TOKEN" -H 'Content-Type: application/json' -d '{}'`,
          }),
    });
    return { apps, filter, error, html };
  }

  router.get('dashboardRuns', '/runs', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const t = await table(ctx, session);
    deps.render.page(ctx, {
      title: 'Runs',
      section: 'runs',
      session,
      template: 'runs',
      data: {
        projectId: session.projectId,
        apps: t.apps,
        states: STATES,
        modes: RUN_MODES,
        syncKept: SYNC_CALLS_PER_APP,
        filter: t.filter,
        filterError: t.error,
        table: t.html,
      },
    });
  });

  router.get('dashboardRunsTable', '/runs/table', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = (await table(ctx, session)).html;
  });

  const ids = (ctx: RouterContext) => {
    const app = resourceName.safeParse(ctx.params.app ?? '');
    const run = runIdSchema.safeParse(ctx.params.run ?? '');
    if (!app.success || !run.success) throw new ApiError(ErrorCode.NotFound, 'There is no such run.');
    return { appName: app.data, runId: run.data };
  };

  /** The kept bytes of a run's result: undefined when none are kept, null when they are gone. */
  const readResult = async (projectId: string, r: RunRecord) =>
    r.result && r.result.kept !== 'dropped'
      ? ((await deps.runs.getResult(projectId, r.appName, r.runId)) ?? null)
      : undefined;

  // The result's body for a row of the run table, loaded when its row is opened (lists read no bodies).
  router.get('dashboardRunResult', '/runs/:app/:run/result', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const { appName, runId } = ids(ctx);
    const r = await deps.runs.get(session.projectId, appName, runId);
    if (!r) throw new ApiError(ErrorCode.NotFound, `There is no run ${runId} of app ${appName}.`);
    const result = r.result
      ? resultView(
          r.result,
          r.streamed === true,
          await readResult(session.projectId, r),
          deps.settings.maxResultBytes,
        )
      : undefined;
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = deps.render.fragment('runResult', { result, href: `/dashboard/runs/${appName}/${runId}` });
  });

  router.get('dashboardRun', '/runs/:app/:run', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const { appName, runId } = ids(ctx);
    const r = await deps.runs.get(session.projectId, appName, runId);
    if (!r) throw new ApiError(ErrorCode.NotFound, `There is no run ${runId} of app ${appName}.`);
    const [d, bytes] = await Promise.all([
      r.webhookHost ? deps.deliveries.get(runId) : undefined,
      readResult(session.projectId, r),
    ]);
    const run = runRow(r, d?.projectId === session.projectId ? d : undefined, {
      now: deps.clock.now(),
      maxResultBytes: deps.settings.maxResultBytes,
      ...(bytes !== undefined ? { resultBytes: bytes } : {}),
    });
    deps.render.page(ctx, {
      title: `Run ${runId}`,
      section: 'runs',
      session,
      template: 'run',
      data: { run, csrf: session.csrf, refreshUrl: run.href, refreshSeconds: deps.settings.refreshSeconds },
    });
  });

  router.post('dashboardCancelRun', '/runs/:app/:run/cancel', async (ctx) => {
    const session = await requireSession(ctx, deps);
    if (!session) return;
    const form = await readCheckedForm(ctx, deps, session);
    const { appName, runId } = ids(ctx);
    // The run store leaves a finished run as it is; the page then shows its final state.
    const r = await deps.runs.requestCancel(session.projectId, appName, runId);
    if (!r) throw new ApiError(ErrorCode.NotFound, `There is no run ${runId} of app ${appName}.`);
    ctx.redirect(backPath(form.back, `/dashboard/runs/${appName}/${runId}`));
    ctx.status = 303;
  });
}
