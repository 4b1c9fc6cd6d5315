/** `apphost runs list|get|cancel`: async run records through the management API. */

import { UsageError } from '../shared/cli/command.ts';
import type { ApiClient } from './api-client.ts';
import { type ClientContext, clientCommand } from './client-command.ts';
import { group } from './group.ts';
import { age, fields, json, table } from './output.ts';

/** A run as the management API presents it (see the OpenAPI document, schema Run). */
export interface RunView {
  run_id: string;
  /** Absent from servers older than sync-call records. */
  mode?: 'sync' | 'async';
  app_name: string;
  path: string;
  state: string;
  created_at: string;
  started_at?: string;
  finished_at?: string;
  executions: number;
  response_status?: number;
  error?: { code: string; message: string };
  cancel_requested: boolean;
  webhook_host?: string;
  streamed?: boolean;
  result?: {
    state: 'complete' | 'truncated' | 'dropped';
    content_type?: string;
    size_bytes: number;
    encoding?: 'utf8' | 'base64';
    body?: string;
    json?: unknown;
  };
  webhook_delivery?: {
    state: string;
    attempts: Array<{ attempt: number; outcome: string; status?: number }>;
  };
}

const STATES = ['queued', 'running', 'success', 'failure', 'timeout', 'cancelled'];
const str = (v: string | boolean | undefined) => (typeof v === 'string' ? v : undefined);

/** App-scoped path when --app is given, else the project-wide one (the run id is unique in the project). */
function runPath(client: ApiClient, runId: string, app: string | undefined): string {
  return app ? client.projectPath('apps', app, 'runs', runId) : client.projectPath('runs', runId);
}

export function describeRun(r: RunView, now: number): string {
  const lines = [
    fields([
      ['run', r.run_id],
      ['app', r.app_name],
      ['function', r.path],
      ['state', `${r.state}${r.cancel_requested && r.state !== 'cancelled' ? ' (cancel requested)' : ''}`],
      ['created', `${r.created_at} (${age(r.created_at, now)})`],
      ['started', r.started_at],
      ['finished', r.finished_at],
      ['executions', r.executions],
      ['status', r.response_status],
      ['error', r.error ? `${r.error.code}: ${r.error.message}` : undefined],
      ['streamed', r.streamed ? 'yes (the result holds the server-sent events)' : undefined],
      ['webhook', r.webhook_host],
      [
        'delivery',
        r.webhook_delivery
          ? `${r.webhook_delivery.state}, ${r.webhook_delivery.attempts.length} attempt(s)${r.webhook_delivery.attempts
              .map((a) => ` [${a.attempt}: ${a.outcome}${a.status ? ` ${a.status}` : ''}]`)
              .join('')}`
          : undefined,
      ],
    ]),
  ];
  const res = r.result;
  if (res) {
    const kind = `${res.content_type ?? 'no content type'}, ${res.size_bytes} bytes`;
    if (res.state === 'dropped')
      lines.push(`result: dropped (${kind}: over the size kept in run records; the webhook or logs have it)`);
    else {
      lines.push(
        `result (${kind}${res.state === 'truncated' ? `, TRUNCATED to the first bytes kept` : ''}):`,
      );
      if (res.json !== undefined) lines.push(json(res.json));
      else if (res.encoding === 'base64') lines.push(`(binary, base64) ${res.body ?? ''}`);
      else lines.push(res.body ?? '');
    }
  } else if (['success', 'failure'].includes(r.state)) lines.push('result: (none recorded)');
  return lines.join('\n');
}

const list = clientCommand(
  {
    name: 'runs list',
    summary:
      'List recent runs of the project (or of one app), newest first: async runs and recorded sync calls.',
    flags: {
      app: { type: 'string', value: 'APP', description: 'only this app' },
      mode: {
        type: 'string',
        value: 'MODE',
        description: 'only async runs or only recorded sync calls (async, sync)',
      },
      state: {
        type: 'string',
        value: 'STATE',
        description: `only runs in this state (${STATES.join(', ')})`,
      },
      limit: { type: 'string', value: 'N', description: 'at most N runs (1-100)', default: '20' },
    },
    examples: [
      'apphost runs list',
      'apphost runs list --app slow --state running --json',
      'apphost runs list --mode sync',
    ],
  },
  async (ctx: ClientContext) => {
    const state = str(ctx.values.state);
    if (state && !STATES.includes(state)) throw new UsageError(`--state must be one of ${STATES.join(', ')}`);
    const mode = str(ctx.values.mode);
    if (mode && mode !== 'sync' && mode !== 'async') throw new UsageError('--mode must be async or sync');
    const limit = str(ctx.values.limit);
    if (limit !== undefined && !/^\d+$/.test(limit)) throw new UsageError('--limit must be a number');
    const app = str(ctx.values.app);
    const client = ctx.client();
    const path = app ? client.projectPath('apps', app, 'runs') : client.projectPath('runs');
    const { runs } = await client.json<{ runs: RunView[] }>(path, { query: { state, mode, limit } });
    if (ctx.json) ctx.io.out(json({ runs }));
    else if (runs.length === 0)
      ctx.io.out(`no runs${app ? ` of ${app}` : ''}${state ? ` in state ${state}` : ''}`);
    else
      ctx.io.out(
        table(
          ['RUN', 'APP', 'FUNCTION', 'MODE', 'STATE', 'STATUS', 'CREATED', 'RESULT'],
          runs.map((r) => [
            r.run_id,
            r.app_name,
            r.path,
            r.mode,
            r.state,
            r.response_status,
            age(r.created_at, ctx.now()),
            r.result
              ? `${r.result.size_bytes}B${r.result.state === 'complete' ? '' : ` ${r.result.state}`}`
              : undefined,
          ]),
        ),
      );
    return 0;
  },
);

const get = clientCommand(
  {
    name: 'runs get',
    summary: "Show one run: state, timestamps, error, webhook attempts and the function's result.",
    args: [{ name: 'RUN_ID', description: 'the run id (the X-Request-Id of the async call)' }],
    flags: { app: { type: 'string', value: 'APP', description: "the run's app (optional)" } },
    examples: ['apphost runs get 2f1c0c8e-…', 'apphost runs get 2f1c0c8e-… --json | jq .result.json'],
  },
  async (ctx) => {
    const client = ctx.client();
    const run = await client.json<RunView>(runPath(client, ctx.args.RUN_ID as string, str(ctx.values.app)));
    ctx.io.out(ctx.json ? json(run) : describeRun(run, ctx.now()));
    return 0;
  },
);

const cancel = clientCommand(
  {
    name: 'runs cancel',
    summary: 'Cancel a queued or running run (a finished one answers 409).',
    args: [{ name: 'RUN_ID', description: 'the run id' }],
    flags: { app: { type: 'string', value: 'APP', description: "the run's app (optional)" } },
    examples: ['apphost runs cancel 2f1c0c8e-…'],
  },
  async (ctx) => {
    const client = ctx.client();
    const run = await client.json<RunView>(runPath(client, ctx.args.RUN_ID as string, str(ctx.values.app)), {
      method: 'DELETE',
    });
    ctx.io.out(
      ctx.json
        ? json(run)
        : run.state === 'cancelled'
          ? `run ${run.run_id} cancelled`
          : `cancel of run ${run.run_id} requested (state ${run.state}); the worker stops it`,
    );
    return 0;
  },
);

export const RUNS_SUBCOMMANDS = { list, get, cancel };
export const runRunsCommand = group(
  'runs',
  'Async runs of the project: list them, show one with its result, cancel one.',
  RUNS_SUBCOMMANDS,
);
