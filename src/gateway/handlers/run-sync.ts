/**
 * A sync call (and, when the app answers `text/event-stream`, a stream): proxy to the app and pass
 * its status, headers and body back unbuffered. The upstream request is aborted when the caller
 * goes away. With `webhookEndpoint`, the response is copied on its way through and enqueued for
 * delivery once complete, off the caller's path.
 */
import { type Readable, Transform } from 'node:stream';
import { CallAbort } from '../../shared/call-abort.ts';
import type { WebhookJob } from '../../shared/contracts/messaging.ts';
import type { AppCaller, AppResponse } from '../../shared/contracts/seams.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { forwardResponseHeaders, isEventStream } from '../../shared/http/upstream.ts';
import { makeWebhookJob } from '../../webhooks/publish.ts';
import type { GatewayContext } from '../context.ts';
import type { GatewaySettings } from '../settings.ts';
import type { PreparedRun } from './prepare.ts';

export const SSE_CONTENT_TYPE = 'text/event-stream; charset=utf-8';
/**
 * Non-stream responses up to this size (by Content-Length) are read whole before they are passed on,
 * and sent in one write.
 */
export const SMALL_RESPONSE_BYTES = 64 * 1024;

export interface RunSyncDeps {
  /** Places the call on a replica with a free slot (the balancer). */
  callApp: AppCaller;
  settings: GatewaySettings;
  now: () => Date;
  /**
   * Enqueues a webhook job; resolves once JetStream stored it or the gateway holds it for retries
   * (bounded; never rejects).
   */
  enqueueWebhook(job: WebhookJob, log: GatewayContext['state']['log']): Promise<void>;
}

export async function runSync(ctx: GatewayContext, run: PreparedRun, deps: RunSyncDeps): Promise<void> {
  // ctx.state.log is read only where it logs: the request's logger is built on first use.
  const { requestId } = ctx.state;
  const abort = new CallAbort();
  // One listener for the end of the call: the caller going away aborts the upstream call, and the
  // replica's slot is freed when the upstream body closes, so make sure it does, whatever happened.
  let res: AppResponse | undefined;
  ctx.res.once('close', () => {
    if (!ctx.res.writableFinished) abort.abort(new Error('client went away'));
    if (res?.body && !res.body.closed) res.body.destroy();
  });

  // Awaited before the caller's response is complete: once a caller has the whole answer, the webhook
  // job is stored in JetStream or held by this gateway (only a crash during an outage can lose it).
  const webhookFor = async (
    status: number,
    contentType: string | undefined,
    body: Buffer,
    runStatus: WebhookJob['runStatus'],
  ): Promise<void> => {
    if (!run.webhook) return;
    await deps.enqueueWebhook(
      makeWebhookJob({
        requestId,
        projectId: run.target.projectId,
        appName: run.target.appName,
        target: run.webhook,
        status,
        contentType,
        body,
        runStatus,
        completedAt: deps.now(),
      }),
      ctx.state.log,
    );
  };

  try {
    res = await deps.callApp(run.app, {
      path: run.target.path,
      query: run.query,
      headers: run.headers,
      body: run.body,
      signal: abort,
      headersTimeoutMs: deps.settings.syncTimeoutMs,
      bodyTimeoutMs: deps.settings.streamIdleTimeoutMs,
      wholeUpTo: SMALL_RESPONSE_BYTES,
      deadline: ctx.state.queueDeadline,
    });
  } catch (err) {
    if (err instanceof ApiError && !abort.aborted) {
      await webhookFor(
        err.status,
        'application/json',
        Buffer.from(JSON.stringify(err.toBody())),
        err.code === ErrorCode.UpstreamTimeout ? 'timeout' : 'failure',
      );
    }
    throw err;
  }
  // The caller may have gone while the call was placed (the listener above saw no body yet).
  if (ctx.res.closed && res.body && !res.body.closed) res.body.destroy();

  const contentType = headerValue(res.headers['content-type']);
  const isStream = isEventStream(contentType);
  ctx.state.mode = isStream ? 'stream' : 'sync';
  ctx.status = res.statusCode;
  for (const [name, value] of Object.entries(forwardResponseHeaders(res.headers))) ctx.set(name, value);
  if (isStream) {
    ctx.set('Content-Type', SSE_CONTENT_TYPE);
    ctx.set('Cache-Control', 'no-cache');
  } else if (!contentType) {
    ctx.remove('Content-Type');
  }

  if (res.whole) {
    // A small, complete response (read whole by the caller): one write instead of a stream pipeline.
    const status = res.statusCode;
    await webhookFor(status, contentType, res.whole, status >= 200 && status < 300 ? 'success' : 'failure');
    ctx.body = res.whole;
    return;
  }

  const length = headerValue(res.headers['content-length']);
  const declared = length !== undefined && /^\d+$/.test(length) ? Number(length) : undefined;
  const appBody: Readable = res.body;
  let body: NodeJS.ReadableStream = appBody;
  if (run.webhook) {
    const limit = deps.settings.maxWebhookBodyBytes;
    const chunks: Buffer[] = [];
    let size = 0;
    const status = res.statusCode;
    body = appBody.pipe(
      new Transform({
        transform(chunk: Buffer, _enc, cb) {
          size += chunk.length;
          if (size <= limit) chunks.push(chunk);
          cb(null, chunk);
        },
        flush(cb) {
          if (size > limit) {
            ctx.state.log.warn({ size, limit }, 'response too large to forward to the webhook');
            cb();
            return;
          }
          // The end of the response waits for the job to be stored or held (see webhookFor).
          webhookFor(
            status,
            contentType,
            Buffer.concat(chunks),
            status >= 200 && status < 300 ? 'success' : 'failure',
          ).then(() => cb(), cb);
        },
      }),
    );
    appBody.once('error', (err) => (body as Transform).destroy(err));
  }
  ctx.body = body;
  if (!isStream && declared !== undefined) ctx.length = declared;
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
