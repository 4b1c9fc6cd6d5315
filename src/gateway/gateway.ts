/**
 * The run endpoint (`{api_url}`): `POST /v4/<project_id>/<app_name>/<path>`, sync, async and streaming,
 * plus custom-domain routing. Built from small middleware; all I/O comes in through `deps`.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Registry } from 'prom-client';
import type { Dispatcher } from 'undici';
import { createRunStore, type RunStore } from '../runs/store.ts';
import { createSyncCallRecorder, type SyncCall } from '../runs/sync-calls.ts';
import { type Clock, systemClock } from '../shared/clock.ts';
import { RUNS_BUCKET, RUNS_STREAM, type WebhookJob } from '../shared/contracts/messaging.ts';
import type { AppCaller, AppResolver } from '../shared/contracts/seams.ts';
import { type AccessLogHooks, logAccess } from '../shared/http/access-log.ts';
import { writeError } from '../shared/http/errors.ts';
import { Agent } from '../shared/http/undici-agent.ts';
import type { Logger } from '../shared/log.ts';
import { createAckInbox } from '../shared/nats/ack-inbox.ts';
import { RUNS_MAX_MSG_BYTES } from '../shared/nats/jetstream.ts';
import type { SecretBox } from '../shared/secretbox.ts';
import { publishWebhookJob } from '../webhooks/publish.ts';
import { type Balancer, DEFAULT_BALANCER_SETTINGS } from './balancer/balancer.ts';
import { createAppCaller } from './balancer/caller.ts';
import { createObservedBalancer } from './balancer/metrics.ts';
import { CallContext } from './call-context.ts';
import type { GatewayState } from './context.ts';
import { HANDED_OFF, type HandedOffRequest } from './dataplane/handed-off.ts';
import { type PrepareDeps, prepareRun } from './handlers/prepare.ts';
import { type RunAsyncDeps, runAsync } from './handlers/run-async.ts';
import { type RunSyncDeps, runSync } from './handlers/run-sync.ts';
import { createGatewayMetrics } from './metrics.ts';
import { authorize, type VerifyRunToken } from './middleware/auth.ts';
import { customDomain } from './middleware/custom-domain.ts';
import { route } from './middleware/route.ts';
import { shuttingDown } from './refusals.ts';
import type { GatewaySettings } from './settings.ts';
import { createWebhookOutbox, DEFAULT_WEBHOOK_OUTBOX_SETTINGS } from './webhook-outbox.ts';

/** Bound on the RUNS stream-info lookup behind the queue-depth gauge. */
export const QUEUE_DEPTH_TIMEOUT_MS = 2_000;

export interface GatewayDeps {
  resolver: AppResolver;
  /** Run-token verification; the cached verifier (token-cache.ts) answers a known token at once. */
  verifyRunToken: VerifyRunToken;
  nc: NatsConnection;
  /** Whether NATS is connected now (shared/nats/connect.ts); by default, whether `nc` is not closed. */
  natsConnected?: () => boolean;
  secretBox: SecretBox;
  log: Logger;
  registry: Registry;
  clock?: Clock;
  settings: GatewaySettings;
  /** Upstream HTTP client; a keep-alive Agent by default. */
  dispatcher?: Dispatcher;
  /**
   * Per-app replica slots and queues, shared with the run worker of the same process; one with
   * default settings by default. The resolver reports replicas into it when it can.
   */
  balancer?: Balancer;
  /** Calls apps some other way than through the balancer (the benchmark's "limiter off" baseline). */
  callApp?: AppCaller;
  /** Run records; opened from RUNS_BUCKET on first use by default. */
  runStore?: RunStore;
}

export interface Gateway {
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  /** Calls apps through this gateway's balancer (the run worker of the process uses it too). */
  readonly callApp: AppCaller;
  readonly draining: boolean;
  /** Requests being served. */
  inflight(): number;
  /** Refuses new calls (503 shutting_down) and waits for in-flight ones, up to `settings.drainTimeoutMs`. */
  drain(): Promise<void>;
  /** Webhook jobs of sync calls not yet taken by JetStream. */
  pendingWebhooks(): number;
  /**
   * Publishes the record of a sync call served elsewhere in this process and already admitted by its
   * own rate bounds (the native data plane's `records`); skipped while NATS is away, as the gateway's own.
   */
  recordSyncCall(call: SyncCall): void;
  /**
   * Hands held webhook jobs to JetStream (up to `settings.webhookOutboxCloseMs`) and closes the default
   * upstream Agent (not a dispatcher passed in).
   */
  close(): Promise<void>;
}

export function createGateway(deps: GatewayDeps): Gateway {
  const { settings, log } = deps;
  const clock = deps.clock ?? systemClock;
  const now = () => new Date(clock.now());
  const ownDispatcher = deps.dispatcher ? undefined : new Agent({ keepAliveTimeout: 30_000 });
  const dispatcher = deps.dispatcher ?? (ownDispatcher as Dispatcher);
  const balancer = deps.balancer ?? createObservedBalancer(DEFAULT_BALANCER_SETTINGS, deps.registry);
  // Each change of an app's routable replicas is logged: the first thing to read when calls wait.
  deps.resolver.watchReplicas?.({
    setReplicas(projectId, appName, replicas) {
      if (balancer.setReplicas(projectId, appName, replicas))
        log.info({ projectId, appName, replicas: replicas.map((r) => r.id) }, 'app replicas changed');
    },
    setStartFailure: (projectId, appName, failure) => balancer.setStartFailure(projectId, appName, failure),
    replicaLoad: (projectId, appName) => balancer.replicaLoad(projectId, appName),
  });
  const callApp =
    deps.callApp ??
    createAppCaller({
      balancer,
      dispatcher,
      replicasReported: deps.resolver.watchReplicas !== undefined,
    });
  const js = jetstream(deps.nc);
  // The 202 path's two JetStream writes (the run, its record) await their acks on one shared inbox.
  const acks = createAckInbox(deps.nc);

  let storePromise: Promise<RunStore> | undefined = deps.runStore
    ? Promise.resolve(deps.runStore)
    : undefined;
  const store = () => {
    storePromise ??= new Kvm(deps.nc)
      .open(RUNS_BUCKET)
      .then((kv) => createRunStore(kv, deps.nc, now, acks))
      .catch((err) => {
        storePromise = undefined;
        throw err;
      });
    return storePromise;
  };

  let draining = false;
  let inflight = 0;
  let idle: (() => void) | undefined;

  // One manager for every scrape, without its account-info check: a scrape asks NATS one thing, the
  // stream's info (without JetStream that fails as the check would, and the gauge is left as it was).
  let queueJsm: ReturnType<typeof jetstreamManager> | undefined;
  const metrics = createGatewayMetrics(deps.registry, {
    inflight: () => inflight,
    queueDepth: async () => {
      queueJsm ??= jetstreamManager(deps.nc, { timeout: QUEUE_DEPTH_TIMEOUT_MS, checkAPI: false });
      return (await (await queueJsm).streams.info(RUNS_STREAM)).state.messages;
    },
  });

  const outbox = createWebhookOutbox({
    publish: (job) => publishWebhookJob(js, job, settings.webhookPublishTimeoutMs),
    settings: {
      ...DEFAULT_WEBHOOK_OUTBOX_SETTINGS,
      maxJobs: settings.webhookOutboxMaxJobs,
      maxBytes: settings.webhookOutboxMaxBytes,
    },
    clock,
    log: log.child({ component: 'webhook-outbox' }),
    count: (outcome) => metrics.webhookJobs.inc({ outcome }),
    held: (jobs) => metrics.webhookOutbox.set(jobs),
  });
  const enqueueWebhook = async (job: WebhookJob, reqLog: Logger): Promise<void> => {
    // A job NATS can never take (over the server's max_payload) must not sit in the outbox for ever.
    const size = Buffer.byteLength(JSON.stringify(job));
    const limit = deps.nc.info?.max_payload ?? 1024 * 1024;
    if (size > limit) {
      metrics.webhookJobs.inc({ outcome: 'too_large' });
      reqLog.warn(
        { size, limit },
        'response too large to forward to the webhook (over the NATS max_payload)',
      );
      return;
    }
    await outbox.add(job, reqLog);
  };

  const syncCalls = createSyncCallRecorder({
    publish: (subject, data) => deps.nc.publish(subject, data),
    connected: deps.natsConnected ?? (() => !deps.nc.isClosed()),
    settings: {
      perAppPerSecond: settings.syncRecordsPerAppPerSecond,
      perSecond: settings.syncRecordsPerSecond,
    },
    skipped: metrics.syncRecordSkipped,
  });

  const maxJobBytes = () => Math.min(deps.nc.info?.max_payload ?? 1024 * 1024, RUNS_MAX_MSG_BYTES);

  const access: AccessLogHooks<GatewayState, CallContext> = {
    log,
    now: () => clock.now(),
    done: (ctx, seconds, aborted) => {
      const s = ctx.state;
      const mode = s.mode ?? 'sync';
      // A call that reached a resolved app; async runs have their own record.
      if (mode !== 'async' && s.app && s.target) {
        const finishedAtMs = clock.now();
        // The record is built only when the rate bounds admit it (under load most calls are over them),
        // asked with the resolver's names (equal to the target's; their hashes are kept, not computed).
        if (syncCalls.admit(s.app.projectId, s.app.appName, finishedAtMs))
          syncCalls.recordAdmitted({
            requestId: s.requestId,
            projectId: s.target.projectId,
            appName: s.target.appName,
            path: s.target.path,
            status: ctx.status,
            ...(s.errorCode ? { errorCode: s.errorCode, errorMessage: s.errorMessage ?? s.errorCode } : {}),
            startedAtMs: s.startedAt,
            finishedAtMs,
            aborted,
            streamed: mode === 'stream',
            ...(s.webhookHost ? { webhookHost: s.webhookHost } : {}),
          });
      }
      // Labels only for apps that resolved: names from unauthenticated or unknown paths would let
      // any caller create unbounded metric series.
      const project = s.app ? s.app.projectId : '';
      const app = s.app ? s.app.appName : '';
      metrics.call(project, app, mode, ctx.status, seconds);
      return { mode, project: s.target?.projectId, app: s.target?.appName };
    },
  };

  // Built once: the handlers' dependencies do not change per call.
  const prepareDeps: PrepareDeps = {
    resolve: (p, a) => deps.resolver.resolve(p, a),
    secretBox: deps.secretBox,
    maxBodyBytes: settings.maxBodyBytes,
  };
  const asyncDeps: RunAsyncDeps = { js: acks, store, settings, now, maxJobBytes };
  const syncDeps: RunSyncDeps = { callApp, settings, now, enqueueWebhook };

  // The run endpoint, in order: custom domain, route, auth, then the call. Anything thrown becomes the
  // one JSON error body (src/shared/http/errors.ts).
  const serve = async (ctx: CallContext): Promise<void> => {
    try {
      // Each step returns a promise only when it must wait (a lookup not in memory, a body still on
      // its way); the usual call runs straight through to the app call in one turn.
      const domain = customDomain(ctx, deps.resolver);
      if (domain) await domain;
      route(ctx);
      const auth = authorize(ctx, deps.verifyRunToken);
      if (auth) await auth;
      const prepared = prepareRun(ctx, prepareDeps);
      const run = prepared instanceof Promise ? await prepared : prepared;
      if (run.async) await runAsync(ctx, run, asyncDeps);
      else await runSync(ctx, run, syncDeps);
    } catch (err) {
      writeError(ctx, err);
    }
    ctx.respond();
  };

  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    // A call the native data plane handed over (dataplane/handoff.ts) keeps the data plane's id, start
    // and queue deadline. They come as one symbol-keyed field of the request, read once here: on the
    // usual call that is one property load that misses, with no new argument, closure, header lookup
    // or second entry point, and `callback()` keeps its (req, res) shape for every server that uses it.
    // Only this process's code can set a symbol-keyed field; a caller's header cannot.
    const handedOff = (req as HandedOffRequest)[HANDED_OFF];
    // Every answer carries the call's id; the gateway's ids are run ids, never the caller's.
    const id = handedOff ? handedOff.requestId : randomUUID();
    const ctx = new CallContext(req, res, {
      requestId: id,
      now: handedOff ? handedOff.startedAt : clock.now(),
      log,
    });
    if (handedOff?.deadline !== undefined) ctx.state.queueDeadline = handedOff.deadline;
    res.setHeader('X-Request-Id', id);
    if (draining) {
      ctx.set('Connection', 'close');
      ctx.status = 503;
      ctx.type = 'application/json';
      ctx.set('Retry-After', String(settings.retryAfterSeconds));
      ctx.body = JSON.stringify(shuttingDown(settings.retryAfterSeconds).toBody());
      ctx.respond();
      return;
    }
    inflight++;
    res.once('close', () => {
      logAccess(access, ctx);
      inflight--;
      if (inflight === 0) idle?.();
    });
    serve(ctx).catch((err: unknown) => {
      // Not reached by the handlers' errors (serve answers those); a bug must not stop the process.
      log.error({ err, requestId: id }, 'could not answer the call');
      res.destroy();
    });
  };

  return {
    callback: () => handler,
    callApp,
    get draining() {
      return draining;
    },
    inflight: () => inflight,
    async drain() {
      draining = true;
      if (inflight === 0) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          log.warn({ inflight }, 'drain bound passed with calls still in flight');
          resolve();
        }, settings.drainTimeoutMs);
        idle = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    },
    pendingWebhooks: () => outbox.pending(),
    recordSyncCall: (call) => syncCalls.recordAdmitted(call),
    async close() {
      await outbox.close(settings.webhookOutboxCloseMs);
      await ownDispatcher?.close();
      acks.close();
    },
  };
}
