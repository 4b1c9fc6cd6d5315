/**
 * One log line and the request metrics per call, recorded when the response is really over (for a
 * stream that is after the last event, which is after the middleware chain has returned).
 */
import type { Middleware } from 'koa';
import type { GatewayState } from '../context.ts';
import type { GatewayMetrics } from '../metrics.ts';

export function accessLog(metrics: GatewayMetrics, now: () => number): Middleware<GatewayState> {
  return async (ctx, next) => {
    const done = () => {
      const s = ctx.state;
      const seconds = (now() - s.startedAt) / 1000;
      const mode = s.mode ?? 'sync';
      // Labels only for apps that resolved: names from unauthenticated or unknown paths would let
      // any caller create unbounded metric series.
      const project = s.app ? s.app.projectId : '';
      const app = s.app ? s.app.appName : '';
      const aborted = !ctx.res.writableFinished;
      metrics.requests.inc({ project, app, mode, status: String(ctx.status) });
      metrics.duration.observe({ project, app, mode }, seconds);
      metrics.inflight.dec();
      const line = {
        status: ctx.status,
        mode,
        project: s.target?.projectId,
        app: s.target?.appName,
        durationMs: Math.round(seconds * 1000),
        aborted,
      };
      if (ctx.status >= 500) s.log.error(line, 'request');
      else if (ctx.status >= 400) s.log.warn(line, 'request');
      else s.log.info(line, 'request');
    };
    ctx.res.once('close', done);
    metrics.inflight.inc();
    await next();
  };
}
