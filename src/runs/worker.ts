/**
 * The run worker: executes accepted async runs from the RUNS stream.
 *
 * At-least-once: a run is acked only after its final record (and its webhook job) are written, so a
 * worker that dies mid-run leaves the message unacked and JetStream redelivers it after `ackWaitMs`;
 * the next execution runs the function again (`executions` counts them). While a run is alive the
 * worker heartbeats the message (`working()`) well inside `ackWaitMs`, so a merely long run is never
 * redelivered to a second worker. A run is bounded by its app's response grace period (→ `timeout`),
 * can be cancelled (→ `cancelled`), and gives up after `maxExecutions` started executions (→ `failure`).
 */
import { AckPolicy, type Consumer, type JsMsg, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { Agent, type Dispatcher } from 'undici';
import { callUpstream } from '../gateway/upstream.ts';
import { type Clock, systemClock } from '../shared/clock.ts';
import { RUNS_STREAM, type RunJob, type RunResult, runCancelSubject } from '../shared/contracts/messaging.ts';
import type { AppResolver } from '../shared/contracts/seams.ts';
import { ApiError } from '../shared/errors.ts';
import type { Replicas } from '../shared/jetstream-replicas.ts';
import type { Logger } from '../shared/log.ts';
import type { SecretBox } from '../shared/secretbox.ts';
import { publishWebhookJob } from '../webhooks/publish.ts';
import { ensureRunsInfrastructure } from './infrastructure.ts';
import { finishRun, graceMs, keepResult, type RunOutcome, startRun, webhookResponse } from './outcome.ts';
import type { RunWorkerSettings } from './settings.ts';
import { createRunStore, type RunStore } from './store.ts';
import { makeWebhookJob } from './webhook-job.ts';

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
  /** Replicas of RUNS and the run-record bucket (see jetstream-replicas.ts); one when not given. */
  replicas?: Replicas;
}

export interface RunWorker {
  start(): Promise<void>;
  /** Stops pulling; waits up to `boundMs` for running runs, then abandons the rest for redelivery. */
  stop(boundMs: number): Promise<void>;
  /** Runs executing right now. */
  active(): number;
}

const TIMEOUT = Symbol('timeout');
const CANCEL = Symbol('cancel');
const SHUTDOWN = Symbol('shutdown');
type AbortReason = typeof TIMEOUT | typeof CANCEL | typeof SHUTDOWN;

const nanos = (ms: number) => ms * 1_000_000;

export function createRunWorker(deps: RunWorkerDeps): RunWorker {
  const { nc, log, settings } = deps;
  const clock = deps.clock ?? systemClock;
  const now = () => new Date(clock.now());
  const ownDispatcher = deps.dispatcher ? undefined : new Agent({ keepAliveTimeout: 30_000 });
  const dispatcher = deps.dispatcher ?? (ownDispatcher as Dispatcher);
  const js = jetstream(nc);
  const maxPayload = () => nc.info?.max_payload ?? 1024 * 1024;

  const metrics = {
    finished: new Counter({
      name: 'apphost_runs_finished_total',
      help: 'Async runs finished, by final state.',
      labelNames: ['state'],
      registers: [deps.registry],
    }),
    executions: new Counter({
      name: 'apphost_run_executions_total',
      help: 'Run executions started (more than runs when runs are redelivered).',
      registers: [deps.registry],
    }),
    duration: new Histogram({
      name: 'apphost_run_duration_seconds',
      help: 'Time one execution of an async run took.',
      labelNames: ['state'],
      buckets: [0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 43200],
      registers: [deps.registry],
    }),
    active: new Gauge({
      name: 'apphost_runs_active',
      help: 'Async runs this worker is executing now.',
      registers: [deps.registry],
    }),
  };

  let store: RunStore | undefined;
  let consumer: Consumer | undefined;
  let cancelSub: Subscription | undefined;
  let stopping = false;
  let loopDone: Promise<void> | undefined;
  const running = new Map<string, AbortController>();
  const tasks = new Set<Promise<void>>();
  let free = settings.concurrency;
  let wakeSlot: (() => void) | undefined;

  const acquire = async () => {
    while (free <= 0 && !stopping) await new Promise<void>((r) => (wakeSlot = r));
    free--;
  };
  const release = () => {
    free++;
    const w = wakeSlot;
    wakeSlot = undefined;
    w?.();
  };

  async function loop(): Promise<void> {
    while (!stopping) {
      await acquire();
      if (stopping) {
        release();
        break;
      }
      let msg: JsMsg | null = null;
      try {
        msg = (await consumer?.next({ expires: settings.pullExpiresMs })) ?? null;
      } catch (err) {
        if (!stopping) log.warn({ err }, 'pulling a run failed; retrying');
        release();
        if (!stopping) await clock.sleep(settings.pullErrorBackoffMs).catch(() => undefined);
        continue;
      }
      if (!msg) {
        release();
        continue;
      }
      if (stopping) {
        msg.nak();
        release();
        break;
      }
      const m = msg;
      const task = handle(m)
        .catch((err) => {
          log.error({ err, seq: m.seq }, 'run handling failed; it will be redelivered');
          m.nak(settings.pullErrorBackoffMs);
        })
        .finally(() => {
          tasks.delete(task);
          release();
        });
      tasks.add(task);
    }
  }

  async function handle(msg: JsMsg): Promise<void> {
    let job: RunJob;
    try {
      job = msg.json<RunJob>();
      if (job.v !== 1 || !job.requestId || !job.projectId || !job.appName) throw new Error('not a v1 RunJob');
    } catch (err) {
      log.error({ err, seq: msg.seq }, 'dropping an unreadable run message');
      msg.term('unreadable');
      return;
    }
    const runLog = log.child({ requestId: job.requestId, project: job.projectId, app: job.appName });
    const s = store as RunStore;

    // The cap counts executions that started (from the record), not deliveries: a message handed
    // back unexecuted by a stopping worker does not use up an execution.
    const current = await s.get(job.projectId, job.appName, job.requestId);
    if (current?.state === 'running' && current.executions >= settings.maxExecutions) {
      const outcome: RunOutcome = {
        state: 'failure',
        error: {
          code: 'redelivery_exhausted',
          message: `the run was started ${current.executions} times without finishing`,
        },
      };
      await complete(msg, job, outcome, runLog);
      return;
    }

    // Registered before the record says "running", so a cancel announced from then on finds us.
    const abort = new AbortController();
    running.set(job.requestId, abort);
    try {
      const rec = await s.update(job.projectId, job.appName, job.requestId, (cur) =>
        startRun(cur, job, now()),
      );
      if (rec?.state !== 'running') {
        runLog.info({ state: rec?.state }, 'run not started: already finished or cancelled');
        await msg.ackAck().catch(() => msg.ack());
        return;
      }
      metrics.executions.inc();
      metrics.active.inc();
      runLog.info({ executions: rec.executions, delivery: msg.info.deliveryCount }, 'run started');
      const started = clock.now();
      let outcome: RunOutcome | undefined;
      try {
        outcome = await execute(job, msg, abort);
      } finally {
        metrics.active.dec();
      }
      if (!outcome) {
        runLog.info('run abandoned on shutdown; it will be redelivered');
        msg.nak();
        return;
      }
      metrics.duration.observe({ state: outcome.state }, (clock.now() - started) / 1000);
      await complete(msg, job, outcome, runLog);
    } finally {
      running.delete(job.requestId);
    }
  }

  /**
   * Webhook job first, then the result bytes, then the final record, then the ack: a crash in between
   * redelivers, never drops; a record that names a result always finds its bytes.
   */
  async function complete(msg: JsMsg, job: RunJob, outcome: RunOutcome, runLog: Logger): Promise<void> {
    const hook = webhookResponse(outcome);
    if (job.webhook && hook) {
      const webhookJob =
        ('size' in outcome ? outcome.size : hook.body.length) > settings.maxWebhookBodyBytes
          ? undefined
          : makeWebhookJob({
              requestId: job.requestId,
              projectId: job.projectId,
              appName: job.appName,
              target: job.webhook,
              status: hook.status,
              contentType: hook.contentType,
              body: hook.body,
              runStatus: hook.runStatus,
              completedAt: now(),
            });
      // A job NATS can never take (base64 body + envelope over max_payload) must not fail the
      // completion: that would nak the run and execute the function again.
      if (!webhookJob || Buffer.byteLength(JSON.stringify(webhookJob)) > maxPayload()) {
        runLog.warn({ size: hook.body.length }, 'response too large to forward to the webhook');
      } else {
        await publishWebhookJob(js, webhookJob, settings.webhookPublishTimeoutMs);
      }
    }
    const s = store as RunStore;
    let result: RunResult | undefined;
    if ('body' in outcome) {
      // Bounded by NATS too: a KV value is one message (a little room for the headers).
      const kept = keepResult(outcome, Math.min(settings.maxResultBytes, maxPayload() - 4096));
      result = kept.result;
      if (kept.bytes) {
        try {
          await s.putResult(job.projectId, job.appName, job.requestId, kept.bytes);
        } catch (err) {
          // The function ran: storing its result must not make it run again.
          runLog.warn(
            { err, size: kept.bytes.length },
            'could not store the run result; it is marked dropped',
          );
          result = { ...kept.result, kept: 'dropped', keptBytes: 0, reason: 'the run store did not take it' };
        }
      }
      if (result.kept !== 'complete')
        runLog.info(
          { kept: result.kept, size: result.sizeBytes, keptBytes: result.keptBytes },
          'run result over the bound',
        );
    }
    await s.update(job.projectId, job.appName, job.requestId, (cur) =>
      finishRun(cur, job, outcome, now(), result),
    );
    metrics.finished.inc({ state: outcome.state });
    runLog.info({ state: outcome.state }, 'run finished');
    await msg.ackAck().catch(() => msg.ack());
  }

  /** Calls the app; undefined when abandoned because the worker is stopping. */
  async function execute(job: RunJob, msg: JsMsg, abort: AbortController): Promise<RunOutcome | undefined> {
    const heartbeat = setInterval(() => msg.working(), Math.max(Math.floor(settings.ackWaitMs / 3), 100));
    const bound = graceMs(job);
    const timer = setTimeout(() => abort.abort(TIMEOUT), bound);
    const reason = (): AbortReason | undefined =>
      abort.signal.aborted ? (abort.signal.reason as AbortReason) : undefined;
    try {
      if (abort.signal.aborted) throw abort.signal.reason;
      const app = await deps.resolver.resolve(job.projectId, job.appName);
      if (!app) {
        return {
          state: 'failure',
          error: { code: 'not_found', message: `app "${job.appName}" no longer exists` },
        };
      }
      const res = await callUpstream({
        dispatcher,
        upstream: app.upstream,
        path: job.path,
        query: job.query,
        headers: job.headers,
        body: Buffer.from(job.bodyBase64, 'base64'),
        signal: abort.signal,
        headersTimeoutMs: bound,
        bodyTimeoutMs: 0,
      });
      const chunks: Buffer[] = [];
      let size = 0;
      const keep = Math.max(settings.maxWebhookBodyBytes, settings.maxResultBytes);
      for await (const chunk of res.body) {
        // Reads to the end (the size is recorded) but keeps only what the webhook or the result can use,
        // plus the chunk that crosses the bound.
        if (size <= keep) chunks.push(chunk as Buffer);
        size += (chunk as Buffer).length;
      }
      const contentType = res.headers['content-type'];
      const ok = res.statusCode >= 200 && res.statusCode < 300;
      return {
        state: ok ? 'success' : 'failure',
        status: res.statusCode,
        ...(typeof contentType === 'string' ? { contentType } : {}),
        body: Buffer.concat(chunks),
        size,
        ...(ok ? {} : { error: { code: 'function_failed', message: `the app answered ${res.statusCode}` } }),
      };
    } catch (err) {
      const why = reason();
      if (why === SHUTDOWN) return undefined;
      if (why === CANCEL) return { state: 'cancelled' };
      if (why === TIMEOUT) {
        return {
          state: 'timeout',
          error: {
            code: 'timeout',
            message: `the run exceeded the app's response grace period of ${bound / 1000} s`,
          },
        };
      }
      if (err instanceof ApiError)
        return { state: 'failure', error: { code: err.code, message: err.message } };
      return { state: 'failure', error: { code: 'internal', message: (err as Error)?.message ?? 'error' } };
    } finally {
      clearInterval(heartbeat);
      clearTimeout(timer);
    }
  }

  return {
    async start() {
      const jsm = await jetstreamManager(nc);
      const kv = await ensureRunsInfrastructure(jsm, new Kvm(nc), deps.replicas);
      store = createRunStore(kv, nc, now);
      const config = {
        durable_name: settings.consumerName,
        ack_policy: AckPolicy.Explicit,
        ack_wait: nanos(settings.ackWaitMs),
        // Unlimited: the worker itself fails a run after maxExecutions started executions.
        max_deliver: -1,
        max_ack_pending: Math.max(settings.concurrency * 4, 64),
      };
      try {
        await jsm.consumers.add(RUNS_STREAM, config);
      } catch {
        const { durable_name: _d, ...rest } = config;
        await jsm.consumers.update(RUNS_STREAM, settings.consumerName, rest);
      }
      consumer = await js.consumers.get(RUNS_STREAM, settings.consumerName);
      cancelSub = nc.subscribe(runCancelSubject('*'), {
        callback: (_err, m) => {
          const runId = m.subject.slice(runCancelSubject('').length);
          const ac = running.get(runId);
          if (ac && !ac.signal.aborted) {
            log.info({ requestId: runId }, 'cancelling a running run');
            ac.abort(CANCEL);
          }
        },
      });
      loopDone = loop();
      log.info({ consumer: settings.consumerName, concurrency: settings.concurrency }, 'run worker started');
    },

    async stop(boundMs) {
      stopping = true;
      wakeSlot?.();
      cancelSub?.unsubscribe();
      const all = Promise.all([...tasks]);
      let timer: NodeJS.Timeout | undefined;
      const bounded = new Promise<'bound'>((r) => {
        timer = setTimeout(() => r('bound'), boundMs);
      });
      if ((await Promise.race([all.then(() => 'done' as const), bounded])) === 'bound') {
        log.warn({ active: running.size }, 'stop bound passed: abandoning running runs for redelivery');
        for (const ac of running.values()) if (!ac.signal.aborted) ac.abort(SHUTDOWN);
        await Promise.race([all, new Promise((r) => setTimeout(r, 2_000))]);
      }
      clearTimeout(timer);
      await Promise.race([loopDone, new Promise((r) => setTimeout(r, settings.pullExpiresMs + 1_000))]);
      await ownDispatcher?.close().catch(() => undefined);
    },

    active: () => running.size,
  };
}
