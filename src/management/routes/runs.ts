/** Run records from the run worker's store, with the webhook delivery attempts; cancel. */
import type { Router, RouterContext } from '@koa/router';
import { type RunRecord, TERMINAL_RUN_STATES } from '../../shared/contracts/messaging.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { type HandlerDeps, param, projectScope } from '../context.ts';
import { errorResponse, ok, operation, type Paths, TAG } from '../operation.ts';
import { presentRun, RunListResponse, RunResponse } from '../present.ts';
import {
  listProjectRunsQuery,
  listRunsQuery,
  parseOrThrow,
  resourceName,
  runId as runIdSchema,
} from '../validation.ts';

export const DEFAULT_RUN_LIST_LIMIT = 20;

export function registerRunRoutes(router: Router, deps: HandlerDeps): void {
  const { runs, deliveries } = deps;
  const ids = (ctx: RouterContext) => ({
    appName: parseOrThrow(resourceName, param(ctx, 'app_name'), 'app_name'),
    runId: parseOrThrow(runIdSchema, param(ctx, 'run_id'), 'run_id'),
  });
  const notFound = (runId: string) => new ApiError(ErrorCode.NotFound, `run ${runId} not found`);

  router.get('listRuns', '/v2/projects/:project_id/apps/:app_name/runs', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const appName = parseOrThrow(resourceName, param(ctx, 'app_name'), 'app_name');
    const q = parseOrThrow(listRunsQuery, { ...ctx.query }, 'query');
    const list = await runs.list(projectId, appName, {
      ...(q.state ? { state: q.state } : {}),
      ...(q.mode ? { mode: q.mode } : {}),
      limit: q.limit ?? DEFAULT_RUN_LIST_LIMIT,
    });
    ctx.body = { runs: list.slice(0, q.limit ?? DEFAULT_RUN_LIST_LIMIT).map((r) => presentRun(r)) };
  });

  /** The run with its webhook delivery and its result's kept bytes. */
  async function showRun(projectId: string, run: RunRecord) {
    const [delivery, bytes] = await Promise.all([
      deliveries.get(run.runId),
      run.result && run.result.kept !== 'dropped'
        ? runs.getResult(projectId, run.appName, run.runId).then((b) => b ?? null)
        : undefined,
    ]);
    // Deliveries are keyed by request id alone: make sure this one belongs to the run's project.
    return presentRun(run, delivery?.projectId === projectId ? delivery : undefined, bytes);
  }

  async function cancel(projectId: string, run: RunRecord | undefined, runId: string) {
    if (!run) throw notFound(runId);
    if (TERMINAL_RUN_STATES.includes(run.state))
      throw new ApiError(ErrorCode.Conflict, `run ${runId} has already finished (state ${run.state})`, {
        details: { state: run.state },
      });
    const updated = await runs.requestCancel(projectId, run.appName, runId);
    if (!updated) throw notFound(runId);
    return presentRun(updated);
  }

  router.get('getRun', '/v2/projects/:project_id/apps/:app_name/runs/:run_id', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const { appName, runId } = ids(ctx);
    const run = await runs.get(projectId, appName, runId);
    if (!run) throw notFound(runId);
    ctx.body = await showRun(projectId, run);
  });

  // Project-wide: every app's runs, and a run by its id alone (run ids are unique in a project).
  router.get('listProjectRuns', '/v2/projects/:project_id/runs', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const q = parseOrThrow(listProjectRunsQuery, { ...ctx.query }, 'query');
    const limit = q.limit ?? DEFAULT_RUN_LIST_LIMIT;
    const list = await runs.list(projectId, q.app, {
      ...(q.state ? { state: q.state } : {}),
      ...(q.mode ? { mode: q.mode } : {}),
      limit,
    });
    ctx.body = { runs: list.slice(0, limit).map((r) => presentRun(r)) };
  });

  router.get('getProjectRun', '/v2/projects/:project_id/runs/:run_id', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const runId = parseOrThrow(runIdSchema, param(ctx, 'run_id'), 'run_id');
    const run = await runs.find(projectId, runId);
    if (!run) throw notFound(runId);
    ctx.body = await showRun(projectId, run);
  });

  router.delete('cancelProjectRun', '/v2/projects/:project_id/runs/:run_id', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const runId = parseOrThrow(runIdSchema, param(ctx, 'run_id'), 'run_id');
    ctx.status = 202;
    ctx.body = await cancel(projectId, await runs.find(projectId, runId), runId);
  });

  // 202: cancellation is requested here and carried out by the run worker.
  router.delete('cancelRun', '/v2/projects/:project_id/apps/:app_name/runs/:run_id', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const { appName, runId } = ids(ctx);
    ctx.status = 202;
    ctx.body = await cancel(projectId, await runs.get(projectId, appName, runId), runId);
  });
}

const cancelled = {
  '202': ok('Cancellation requested; the run worker stops the run.', RunResponse),
  '409': errorResponse('The run has already finished.'),
};

export const runPaths: Paths = {
  '/v2/projects/{project_id}/runs': {
    get: operation({
      operationId: 'listProjectRuns',
      tag: TAG.runs,
      summary:
        'Recent runs of every app of the project (or of `app`), newest first; results as metadata only',
      params: ['project_id'],
      query: listProjectRunsQuery,
      responses: { '200': ok('The runs.', RunListResponse) },
    }),
  },
  '/v2/projects/{project_id}/runs/{run_id}': {
    get: operation({
      operationId: 'getProjectRun',
      tag: TAG.runs,
      summary: 'A run by its id alone (run ids are unique in a project): as getRun',
      params: ['project_id', 'run_id'],
      responses: { '200': ok('The run, with its result.', RunResponse) },
    }),
    delete: operation({
      operationId: 'cancelProjectRun',
      tag: TAG.runs,
      summary: 'Cancel a queued or running run',
      params: ['project_id', 'run_id'],
      responses: cancelled,
    }),
  },
  '/v2/projects/{project_id}/apps/{app_name}/runs': {
    get: operation({
      operationId: 'listRuns',
      tag: TAG.runs,
      summary: 'Recent runs of an app, newest first; results as metadata only',
      params: ['project_id', 'app_name'],
      query: listRunsQuery,
      responses: { '200': ok('The runs.', RunListResponse) },
    }),
  },
  '/v2/projects/{project_id}/apps/{app_name}/runs/{run_id}': {
    get: operation({
      operationId: 'getRun',
      tag: TAG.runs,
      summary: "A run: state, timestamps, error, the function's result, webhook delivery attempts",
      params: ['project_id', 'app_name', 'run_id'],
      responses: { '200': ok('The run, with its result.', RunResponse) },
    }),
    delete: operation({
      operationId: 'cancelRun',
      tag: TAG.runs,
      summary: 'Cancel a queued or running run',
      params: ['project_id', 'app_name', 'run_id'],
      responses: cancelled,
    }),
  },
};
