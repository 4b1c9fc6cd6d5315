/**
 * GET /v2/projects/{project_id}/apps/{app_name}/logs: an app's log lines from every replica, oldest
 * first (JSON), or with `follow=true` as server-sent events until the client goes away or a bound ends
 * the follow (then an `end` event says why).
 */
import type { Router } from '@koa/router';
import { z } from 'zod';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { type HandlerDeps, param, projectScope } from '../context.ts';
import { parseSince } from '../logs/parse.ts';
import { respondWithLogFollow } from '../logs/sse.ts';
import type { LogLine, LogQuery } from '../logs/types.ts';
import { operation, type Paths, TAG } from '../operation.ts';
import { parseOrThrow, resourceName } from '../validation.ts';

export const logsQuery = z.strictObject({
  since: z
    .string()
    .regex(/^(\d+[smhd]|\d{4}-\d{2}-\d{2}T.+)$/, 'must be a duration (30s, 10m, 2h, 1d) or an RFC 3339 time')
    .meta({
      param: {
        description: 'Only lines newer than this: a duration (30s, 10m, 2h, 1d) or an RFC 3339 time.',
      },
    })
    .optional(),
  tail: z.coerce
    .number()
    .int()
    .min(1)
    .meta({
      param: {
        description:
          'Only the last N lines of each replica (at most APPHOST_MANAGEMENT_LOGS_MAX_LINES, 1000).',
      },
    })
    .optional(),
  follow: z
    .enum(['true', 'false', '1', '0'])
    .meta({
      param: {
        description:
          'true: answer text/event-stream: `event: log` (data: a LogLine) for each line, then new ones as they ' +
          'are written, until the client goes away or the server ends the follow with `event: end` ' +
          '(data: {"reason": "max_duration" | "slow_client" | "source_ended" | "source_failed"}).',
      },
    })
    .optional(),
});

export const LogLineResponse = z
  .strictObject({
    time: z.iso.datetime({ offset: true }).meta({ description: 'When the line was written.' }).optional(),
    replica: z
      .string()
      .meta({ description: 'Which replica wrote it: the pod name in a cluster, local-<pid> in local mode.' }),
    stream: z.enum(['stdout', 'stderr']).optional(),
    message: z.string().meta({ description: 'The line as the app wrote it.' }),
    request_id: z
      .string()
      .meta({ description: 'The request id the runtime tagged the line with (the call it was about).' })
      .optional(),
  })
  .meta({ id: 'LogLine' });
export const LogLinesResponse = z.strictObject({ lines: z.array(LogLineResponse) }).meta({ id: 'LogLines' });

export function presentLogLine(l: LogLine): z.output<typeof LogLineResponse> {
  return {
    ...(l.time ? { time: l.time } : {}),
    replica: l.replica,
    ...(l.stream ? { stream: l.stream } : {}),
    message: l.message,
    ...(l.requestId ? { request_id: l.requestId } : {}),
  };
}

export function registerLogRoutes(router: Router, deps: HandlerDeps): void {
  router.get('getAppLogs', '/v2/projects/:project_id/apps/:app_name/logs', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const appName = parseOrThrow(resourceName, param(ctx, 'app_name'), 'app_name');
    const q = parseOrThrow(logsQuery, { ...ctx.query }, 'query');
    const { settings } = deps;
    const logs = deps.logs;
    if (!logs) throw new ApiError(ErrorCode.NotFound, 'logs are not available on this server');
    if (!(await deps.store.appExists(projectId, appName)))
      throw new ApiError(ErrorCode.NotFound, `app ${appName} not found`);
    const sinceMs = q.since === undefined ? undefined : parseSince(q.since, deps.clock.now());
    if (q.since !== undefined && sinceMs === undefined)
      throw new ApiError(ErrorCode.BadRequest, `invalid query: since: '${q.since}' is not an RFC 3339 time`);
    const query: LogQuery = {
      ...(sinceMs !== undefined ? { sinceMs } : {}),
      tail: Math.min(q.tail ?? settings.logsMaxLines, settings.logsMaxLines),
    };

    if (q.follow !== 'true' && q.follow !== '1') {
      const lines = await logs.read(projectId, appName, query, settings.logsMaxLines);
      ctx.body = { lines: lines.map(presentLogLine) };
      return;
    }

    // Follow: ends when the client goes away, at logsFollowMaxMs, or when the client reads too slowly.
    const log = ctx.state.log as { info(o: object, m: string): void };
    respondWithLogFollow(ctx, {
      follow: (signal) => logs.follow(projectId, appName, query, signal),
      present: presentLogLine,
      maxMs: settings.logsFollowMaxMs,
      heartbeatMs: settings.logsHeartbeatMs,
      maxBufferedBytes: settings.logsMaxBufferedBytes,
      ended: (_reason, err) => {
        if (err) log.info({ err: err.message }, 'log follow ended');
      },
    });
  });
}

export const logPaths: Paths = {
  '/v2/projects/{project_id}/apps/{app_name}/logs': {
    get: operation({
      operationId: 'getAppLogs',
      tag: TAG.logs,
      summary: "An app's log lines, every replica, oldest first; with follow=true, server-sent events",
      params: ['project_id', 'app_name'],
      query: logsQuery,
      responses: {
        '200': {
          description: 'The lines (JSON), or with follow=true a server-sent event stream of LogLine events.',
          content: {
            'application/json': { schema: LogLinesResponse },
            'text/event-stream': { schema: { type: 'string' } },
          },
        },
      },
    }),
  },
};
