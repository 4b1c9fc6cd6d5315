/**
 * `?async=true`: queue the run on RUNS (message id = request id) and answer 202 `{"run_id"}` only
 * once JetStream has acknowledged it. Publish first, record second: a run that is queued is never
 * lost even if the record write fails (the worker creates a missing record), and a record is never
 * written for a run that was not queued.
 */
import { queuedRecordFor } from '../../runs/outcome.ts';
import type { RunStore } from '../../runs/store.ts';
import { type RunJob, runSubject } from '../../shared/contracts/messaging.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { payloadTooLarge } from '../../shared/http/body.ts';
import { publishIdempotent } from '../../shared/jetstream-publish.ts';
import type { JetStreamPublisher } from '../../shared/nats/ack-inbox.ts';
import { createSendTurn } from '../../shared/nats/send-turn.ts';
import { withLegacyLimitBytes } from '../body.ts';
import type { GatewayContext } from '../context.ts';
import type { GatewaySettings } from '../settings.ts';
import type { PreparedRun } from './prepare.ts';

/**
 * Accepts arriving in one event-loop turn (each from its own socket's callback) send their publishes in
 * one write. Their records need no turn: the publish acks of one socket read resume their accepts in one
 * microtask run, whose record writes nats.js already sends in one write — a turn there only made every
 * accept wait for the rest of the loop's work (p99 ~1 ms of the 202 at c=32).
 */
const sendTurn = createSendTurn();

export interface RunAsyncDeps {
  /** The gateway's shared ack inbox (or a `JetStreamClient`). */
  js: JetStreamPublisher;
  store(): Promise<RunStore>;
  settings: GatewaySettings;
  now: () => Date;
  /** Largest RunJob message NATS takes (server max_payload, capped by the RUNS stream's max_msg_size). */
  maxJobBytes(): number;
}

export async function runAsync(ctx: GatewayContext, run: PreparedRun, deps: RunAsyncDeps): Promise<void> {
  // ctx.state.log is read only where it logs: the request's logger is built on first use.
  const { requestId } = ctx.state;
  ctx.state.mode = 'async';
  const acceptedAt = deps.now().toISOString();
  const job: RunJob = {
    v: 1,
    requestId,
    projectId: run.target.projectId,
    appName: run.target.appName,
    path: run.target.path,
    query: run.query,
    headers: run.headers,
    bodyBase64: run.body.toString('base64'),
    ...(run.webhook ? { webhook: run.webhook } : {}),
    acceptedAt,
    gracePeriodSeconds: run.app.gracePeriodSeconds,
  };
  // Encoded once: its size is checked and the same bytes are published (a string would be encoded again).
  const payload = Buffer.from(JSON.stringify(job));
  const limit = deps.maxJobBytes();
  if (payload.length > limit) {
    // The body travels base64-encoded inside the job, so async bodies are limited to ~3/4 of this.
    throw withLegacyLimitBytes(
      payloadTooLarge(Math.floor((limit * 3) / 4) - 4096, 'request body is too large for an async run'),
    );
  }
  try {
    await sendTurn(() =>
      publishIdempotent(deps.js, runSubject(job.projectId, job.appName), payload, {
        msgID: requestId,
        timeoutMs: deps.settings.publishTimeoutMs,
      }),
    );
  } catch (err) {
    throw new ApiError(ErrorCode.QueueUnavailable, 'the run queue is unavailable; the run was not accepted', {
      retryAfter: deps.settings.retryAfterSeconds,
      cause: err,
    });
  }
  const record = queuedRecordFor(job);
  try {
    const store = await deps.store();
    await store.createQueued(record);
  } catch (err) {
    // The run is durably queued; the worker writes the record when it picks the run up.
    ctx.state.log.warn({ err }, 'could not write the queued run record');
  }
  ctx.status = 202;
  ctx.type = 'application/json';
  ctx.body = JSON.stringify({ run_id: requestId });
}
