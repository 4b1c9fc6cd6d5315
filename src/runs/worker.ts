/**
 * The run worker: executes accepted async runs from the RUNS stream.
 *
 * At-least-once: a run is acked only after its final record and its webhook job are written, so a
 * worker that dies mid-run leaves the message unacked and JetStream redelivers it after `ackWaitMs`;
 * the next execution runs the function again (`executions` counts them) — unless the record is final
 * already, then the delivery only finishes what the record says (complete.ts). While it holds a run the
 * worker heartbeats the message (`working()`) well inside `ackWaitMs`, so a merely long run, or writes
 * waiting out a NATS failover (retried within `writeTimeoutMs`), are never redelivered to a second
 * worker. A run is bounded by its app's response grace period (→ `timeout`), can be cancelled
 * (→ `cancelled`), and gives up after `maxExecutions` started executions (→ `failure`).
 * The pieces: pulling (src/shared/nats/pull-loop.ts on pull-subscription.ts), executing (execute.ts),
 * finishing (complete.ts).
 */
import { randomUUID } from 'node:crypto';
import { AckPolicy, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Registry } from 'prom-client';
import type { Dispatcher } from 'undici';
import type { BackoffSettings } from '../shared/backoff.ts';
import { CallAbort } from '../shared/call-abort.ts';
import { type Clock, systemClock } from '../shared/clock.ts';
import { RUNS_STREAM, type RunJob, runCancelSubject } from '../shared/contracts/messaging.ts';
import type { AppCall, AppCaller, AppResolver, AppSlot } from '../shared/contracts/seams.ts';
import { ApiError, ErrorCode } from '../shared/errors.ts';
import { Agent } from '../shared/http/undici-agent.ts';
import { type Logger, lazyChild } from '../shared/log.ts';
import { type AckInbox, createAckInbox } from '../shared/nats/ack-inbox.ts';
import { kvOverInbox } from '../shared/nats/inbox-kv.ts';
import { ensureConsumer, nanos } from '../shared/nats/jetstream.ts';
import { type PullLoop, startPullLoop } from '../shared/nats/pull-loop.ts';
import {
  createPullSubscription,
  type PulledMsg,
  type PullSubscription,
} from '../shared/nats/pull-subscription.ts';
import type { Replicas } from '../shared/nats/replicas.ts';
import { createSendTurn } from '../shared/nats/send-turn.ts';
import { retryJetStream } from '../shared/nats/setup.ts';
import type { SecretBox } from '../shared/secretbox.ts';
import { type CompleteDeps, completeRun, finishDelivery } from './complete.ts';
import { CANCEL, executeRun, SHUTDOWN } from './execute.ts';
import { ensureRunsInfrastructure } from './infrastructure.ts';
import { createRunWorkerMetrics } from './metrics.ts';
import { type RunOutcome, startRun } from './outcome.ts';
import type { RunWorkerSettings } from './settings.ts';
import { createRunStore, isTerminal, type RunStore, type VersionedRun } from './store.ts';

export interface RunWorkerDeps {
  nc: NatsConnection;
  resolver: AppResolver;
  /** Not needed to execute runs (webhook secrets stay sealed in the job); kept for symmetry. */
  secretBox?: SecretBox;
  log: Logger;
  registry: Registry;
  clock?: Clock;
  settings: RunWorkerSettings;
  dispatcher?: Dispatcher;
  /** Replicas of RUNS and the run-record bucket (src/shared/nats/replicas.ts); one when not given. */
  replicas?: Replicas;
  /**
   * The gateway's balancer: a run takes a replica slot like a sync call (waiting in the app's queue,
   * or for a replica to start) before it counts as started. Without it, runs go to the app's upstream.
   */
  callApp?: AppCaller;
}

export interface RunWorker {
  start(): Promise<void>;
  /** Stops pulling; waits up to `boundMs` for running runs, then abandons the rest for redelivery. */
  stop(boundMs: number): Promise<void>;
  /** Runs executing right now. */
  active(): number;
  /** Runs of the app this worker holds (waiting for a slot or running), for the load report. */
  held(projectId: string, appName: string): number;
}

const decoder = new TextDecoder();

/** Pauses between retries of a write JetStream refused. */
const WRITE_RETRY_BACKOFF: BackoffSettings = { baseDelayMs: 100, maxDelayMs: 2_000 };

/** Slot errors after which a run stays queued (it goes back to JetStream for a while). */
const WAIT_AGAIN: ReadonlySet<string> = new Set([
  ErrorCode.QueueFull,
  ErrorCode.QueueTimeout,
  ErrorCode.ColdStartTimeout,
]);

export function createRunWorker(deps: RunWorkerDeps): RunWorker {
  const { nc, log, settings } = deps;
  const clock = deps.clock ?? systemClock;
  const now = () => new Date(clock.now());
  const ownDispatcher = deps.dispatcher ? undefined : new Agent({ keepAliveTimeout: 30_000 });
  const dispatcher = deps.dispatcher ?? (ownDispatcher as Dispatcher);
  const metrics = createRunWorkerMetrics(deps.registry);
  const heartbeatEveryMs = Math.max(Math.floor(settings.ackWaitMs / 3), 100);
  // The writes of runs that reach the same step in one event-loop turn leave in one socket write.
  const sendTurn = createSendTurn();

  let store: RunStore | undefined;
  let inbox: AckInbox | undefined;
  let completeDeps: Omit<CompleteDeps, 'retry'> | undefined;
  let cancelSub: Subscription | undefined;
  let pulling: PullLoop | undefined;
  let pulls: PullSubscription | undefined;
  const running = new Map<string, CallAbort>();
  const holding = new Map<string, number>();
  const hold = (key: string, delta: number) => {
    const n = (holding.get(key) ?? 0) + delta;
    if (n > 0) holding.set(key, n);
    else holding.delete(key);
  };

  async function handle(msg: PulledMsg): Promise<void> {
    let job: RunJob;
    try {
      job = JSON.parse(decoder.decode(msg.data)) as RunJob;
      if (job.v !== 1 || !job.requestId || !job.projectId || !job.appName) throw new Error('not a v1 RunJob');
    } catch (err) {
      log.error({ err, seq: msg.seq }, 'dropping an unreadable run message');
      msg.term('unreadable');
      return;
    }
    // Made on the first line logged: most runs log nothing below info.
    const runLog = lazyChild(log, { requestId: job.requestId, project: job.projectId, app: job.appName });
    const s = store as RunStore;
    // Writes wait out a NATS failover within the bound instead of handing the run back at the first refusal.
    const retry = <T>(what: string, step: () => Promise<T>) =>
      retryJetStream(what, () => sendTurn(step), {
        boundMs: settings.writeTimeoutMs,
        log: runLog,
        backoff: WRITE_RETRY_BACKOFF,
      });
    const finishing: CompleteDeps = { ...(completeDeps as Omit<CompleteDeps, 'retry'>), retry };
    const complete = (outcome: RunOutcome, from?: VersionedRun) =>
      completeRun(msg, job, outcome, runLog, finishing, from);
    // Held from the first read to the ack — while waiting for a replica slot, running, and writing the
    // outcome (which may wait for NATS to recover): a message whose ack wait passed would be redelivered
    // and run again.
    const heartbeat = setInterval(() => msg.working(), heartbeatEveryMs);
    // Cancel, timeout and shutdown switch of this run; only read as a CallSignal (not an AbortController: ~4 µs each).
    const abort = new CallAbort();
    const key = `${job.projectId}/${job.appName}`;
    let held = false;
    let slot: AppSlot | undefined;
    try {
      const read = await retry('reading the run record', () =>
        s.read(job.projectId, job.appName, job.requestId),
      );
      const current = read.record;
      if (current && isTerminal(current.state)) {
        runLog.info({ state: current.state }, 'run already finished; finishing its delivery');
        await finishDelivery(msg, job, current, runLog, finishing);
        return;
      }
      // The cap counts executions that started (from the record), not deliveries: a message handed
      // back unexecuted by a stopping worker does not use up an execution.
      if (current?.state === 'running' && current.executions >= settings.maxExecutions) {
        await complete(
          {
            state: 'failure',
            error: {
              code: 'redelivery_exhausted',
              message: `the run was started ${current.executions} times without finishing`,
            },
          },
          read,
        );
        return;
      }

      // Registered before the record says "running", so a cancel announced from then on finds us.
      running.set(job.requestId, abort);
      hold(key, 1);
      held = true;
      // A replica slot first: waiting for capacity (or a cold start) is not an execution.
      if (deps.callApp) {
        const app = await deps.resolver.resolve(job.projectId, job.appName);
        if (!app) {
          await complete(
            {
              state: 'failure',
              error: { code: 'not_found', message: `app "${job.appName}" no longer exists` },
            },
            read,
          );
          return;
        }
        try {
          slot = await deps.callApp.reserve(app, abort);
        } catch (err) {
          if (abort.aborted) {
            msg.nak();
            return;
          }
          const code = err instanceof ApiError ? err.code : undefined;
          const waited = clock.now() - Date.parse(job.acceptedAt);
          if (code && WAIT_AGAIN.has(code) && !(waited >= settings.maxQueuedMs)) {
            runLog.info({ code }, 'no replica slot yet; the run stays queued');
            msg.nak(settings.capacityRetryMs);
            return;
          }
          if (code && (WAIT_AGAIN.has(code) || code === ErrorCode.AppStartFailed)) {
            const message =
              code === ErrorCode.AppStartFailed
                ? (err as ApiError).message
                : `no replica of the app took the run within ${Math.round(settings.maxQueuedMs / 1000)} s of its acceptance`;
            await complete({ state: 'failure', error: { code, message } }, read);
            return;
          }
          throw err;
        }
      }
      const executionId = randomUUID();
      // From the record read above: one round trip, unless something changed it since (a cancel).
      const started = await retry('starting the run', () =>
        s.change(
          job.projectId,
          job.appName,
          job.requestId,
          (cur) => startRun(cur, job, now(), executionId),
          read,
        ),
      );
      const rec = started.record;
      if (rec?.state !== 'running' || rec.executionId !== executionId) {
        runLog.info({ state: rec?.state }, 'run not started: already finished or cancelled');
        await finishDelivery(msg, job, rec, runLog, finishing);
        return;
      }
      metrics.executions.inc();
      metrics.active.inc();
      runLog.info({ executions: rec.executions, delivery: msg.info.deliveryCount }, 'run started');
      const startedAt = clock.now();
      let outcome: RunOutcome | undefined;
      try {
        const reserved = slot;
        outcome = await executeRun(job, abort, {
          resolver: deps.resolver,
          dispatcher,
          ...(reserved ? { send: (call: AppCall) => reserved.call(call) } : {}),
          maxKeptBodyBytes: Math.max(settings.maxWebhookBodyBytes, settings.maxResultBytes),
        });
      } finally {
        metrics.active.dec();
      }
      if (!outcome) {
        runLog.info('run abandoned on shutdown; it will be redelivered');
        msg.nak();
        return;
      }
      metrics.duration.observe({ state: outcome.state }, (clock.now() - startedAt) / 1000);
      await complete(outcome, started);
    } finally {
      clearInterval(heartbeat);
      // Unused (the run was not started, or ended before its call): back to the app's pool.
      slot?.release();
      if (running.get(job.requestId) === abort) running.delete(job.requestId);
      if (held) hold(key, -1);
    }
  }

  return {
    async start() {
      const jsm = await jetstreamManager(nc);
      // The run's record and result writes, its reads and its webhook job: answered on one shared inbox.
      inbox = createAckInbox(nc);
      const kv = kvOverInbox(await ensureRunsInfrastructure(jsm, deps.replicas), inbox);
      store = createRunStore(kv, nc, now);
      completeDeps = {
        js: inbox,
        store,
        now,
        maxWebhookBodyBytes: settings.maxWebhookBodyBytes,
        maxResultBytes: settings.maxResultBytes,
        webhookPublishTimeoutMs: settings.webhookPublishTimeoutMs,
        maxPayload: () => nc.info?.max_payload ?? 1024 * 1024,
        finished: (state) => metrics.finished.inc({ state }),
        // Not waited for (complete.ts): it leaves with the pulls and writes of the next turn.
        ack: (m) => {
          sendTurn(async () => m.ack()).catch((err: unknown) => {
            log.debug({ err, seq: m.seq }, 'acking a finished run failed; it will be redelivered');
          });
        },
      };
      await ensureConsumer(jsm, RUNS_STREAM, {
        durable_name: settings.consumerName,
        ack_policy: AckPolicy.Explicit,
        ack_wait: nanos(settings.ackWaitMs),
        // Unlimited: the worker itself fails a run after maxExecutions started executions.
        max_deliver: -1,
        max_ack_pending: Math.max(settings.concurrency * 4, 64),
      });
      // Pulls answered on one subscription for the worker's life, not one per pull (nats.js fetch()).
      pulls = createPullSubscription(nc, RUNS_STREAM, settings.consumerName);
      cancelSub = nc.subscribe(runCancelSubject('*'), {
        callback: (_err, m) => {
          const runId = m.subject.slice(runCancelSubject('').length);
          const ac = running.get(runId);
          if (ac && !ac.aborted) {
            log.info({ requestId: runId }, 'cancelling a running run');
            ac.abort(CANCEL);
          }
        },
      });
      pulling = startPullLoop({
        consumer: pulls,
        concurrency: settings.concurrency,
        expiresMs: settings.pullExpiresMs,
        errorBackoffMs: settings.pullErrorBackoffMs,
        clock,
        log,
        handle,
        turn: sendTurn,
        onError: (err, m) => {
          log.error({ err, seq: m.seq }, 'run handling failed; it will be redelivered');
          m.nak(settings.pullErrorBackoffMs);
        },
      });
      log.info({ consumer: settings.consumerName, concurrency: settings.concurrency }, 'run worker started');
    },

    async stop(boundMs) {
      pulling?.stop();
      cancelSub?.unsubscribe();
      const all = pulling?.done ?? Promise.resolve();
      let timer: NodeJS.Timeout | undefined;
      const bounded = new Promise<'bound'>((r) => {
        timer = setTimeout(() => r('bound'), boundMs);
      });
      if ((await Promise.race([all.then(() => 'done' as const), bounded])) === 'bound') {
        log.warn({ active: running.size }, 'stop bound passed: abandoning running runs for redelivery');
        for (const ac of running.values()) if (!ac.aborted) ac.abort(SHUTDOWN);
        await Promise.race([all, new Promise((r) => setTimeout(r, 2_000))]);
      }
      clearTimeout(timer);
      // The last pull ended with the loop's stop, its subscription with it; this ends the status listener.
      pulls?.close();
      inbox?.close();
      await ownDispatcher?.close().catch(() => undefined);
    },

    active: () => running.size,
    held: (projectId, appName) => holding.get(`${projectId}/${appName}`) ?? 0,
  };
}
