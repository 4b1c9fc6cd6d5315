/**
 * The webhook dispatcher: pulls delivery jobs from the shared durable WEBHOOKS consumer and makes one
 * attempt per JetStream delivery. Retries are JetStream redeliveries (`nak(delay)`), so a dispatcher
 * that dies between attempts loses nothing; the attempt count lives in the delivery record, which is
 * written before each attempt starts, so a dispatcher that dies during an attempt cannot cause a 4th.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Registry } from 'prom-client';
import { type Clock, systemClock } from '../shared/clock.ts';
import { WEBHOOKS_STREAM } from '../shared/contracts/messaging.ts';
import type { Logger } from '../shared/log.ts';
import { createAckInbox } from '../shared/nats/ack-inbox.ts';
import { kvOverInbox } from '../shared/nats/inbox-kv.ts';
import { type PullLoop, startPullLoop } from '../shared/nats/pull-loop.ts';
import { createPullSubscription, type PullSubscription } from '../shared/nats/pull-subscription.ts';
import type { Replicas } from '../shared/nats/replicas.ts';
import { createSendTurn, type SendTurn } from '../shared/nats/send-turn.ts';
import type { SecretBox } from '../shared/secretbox.ts';
import { createDeliveryStore } from './deliveries.ts';
import { createJobHandler, type JobMessage } from './handle-job.ts';
import { createHttpTransport, type DeliveryTransport } from './http-transport.ts';
import { createWebhookMetrics } from './metrics.ts';
import type { WebhookSettings } from './settings.ts';
import { createSsrfGuard, errorText, type ResolveHost, systemResolveHost } from './ssrf.ts';
import { ensureWebhooksConsumer, openDeliveriesBucket, WEBHOOKS_CONSUMER } from './stream.ts';

export { INTERRUPTED_ATTEMPT, parseWebhookJob } from './handle-job.ts';

export interface WebhookDispatcherDeps {
  nc: NatsConnection;
  secretBox: SecretBox;
  log: Logger;
  registry: Registry;
  settings: WebhookSettings;
  clock?: Clock;
  resolveHost?: ResolveHost;
  /** The deliveries bucket (see `openDeliveriesBucket`); opened from `nc` when absent. */
  deliveriesKv?: KV;
  /** Replicas of WEBHOOKS and the deliveries bucket (src/shared/nats/replicas.ts); one when not given. */
  replicas?: Replicas;
  /** Replaces the HTTP transport (tests of faults the network cannot produce). */
  transport?: DeliveryTransport;
}

export interface WebhookDispatcher {
  start(): Promise<void>;
  /** Stops pulling and waits up to `boundMs` for in-flight attempts to finish. */
  stop(boundMs: number): Promise<void>;
  /** Attempts in flight now. */
  inFlight(): number;
}

export function createWebhookDispatcher(deps: WebhookDispatcherDeps): WebhookDispatcher {
  const clock = deps.clock ?? systemClock;
  const { settings } = deps;
  const metrics = createWebhookMetrics(deps.registry);
  const transport =
    deps.transport ??
    createHttpTransport({
      guard: createSsrfGuard({
        allowCidrs: settings.allowCidrs,
        resolveHost: deps.resolveHost ?? systemResolveHost,
      }),
      attemptTimeoutMs: settings.attemptTimeoutMs,
      maxResponseBytes: settings.maxResponseBytes,
    });
  let handle: ((msg: JobMessage) => Promise<void>) | undefined;
  let pulling: PullLoop | undefined;
  let pulls: PullSubscription | undefined;
  let running = false;
  let turn: SendTurn | undefined;

  return {
    async start() {
      if (running) return;
      if (!handle) {
        const kv =
          deps.deliveriesKv ?? (await openDeliveriesBucket(await jetstreamManager(deps.nc), deps.replicas));
        // Reads and writes answered on one shared inbox: no nats.js request() (and its Errors) per write.
        const records = createDeliveryStore(kvOverInbox(kv, createAckInbox(deps.nc)));
        // Jobs that reach the same step in one event-loop turn write their records in one socket write.
        const sendTurn = createSendTurn();
        handle = createJobHandler({
          store: {
            get: records.get,
            load: (requestId) => sendTurn(() => records.load(requestId)),
            save: (record, revision) => sendTurn(() => records.save(record, revision)),
          },
          transport,
          secretBox: deps.secretBox,
          log: deps.log,
          metrics,
          clock,
          retryDelayMs: settings.retryDelayMs,
          errorBackoffMs: settings.errorBackoffMs,
          errorBackoffMaxMs: settings.recordRetryMaxDelayMs,
          recordGiveUpMs: settings.recordGiveUpMs,
          // Not waited for: it leaves with the pull and record writes of the next turn. A lost ack
          // redelivers the job, which then finds its record delivered and is acked without an attempt.
          ack: (m) => {
            sendTurn(async () => m.ack()).catch((err: unknown) => {
              deps.log.debug({ err: errorText(err), seq: m.seq }, 'acking a delivered job failed');
            });
          },
        });
        turn = sendTurn;
      }
      const jsm = await jetstreamManager(deps.nc);
      await ensureWebhooksConsumer(jsm, deps.replicas);
      // Pulls answered on one subscription for the dispatcher's life, not one per pull (fetch()).
      pulls = createPullSubscription(deps.nc, WEBHOOKS_STREAM, WEBHOOKS_CONSUMER);
      const handleJob = handle;
      pulling = startPullLoop({
        consumer: pulls,
        concurrency: settings.concurrency,
        expiresMs: settings.pullExpiresMs,
        errorBackoffMs: settings.errorBackoffMs,
        clock,
        log: deps.log,
        handle: (msg) => handleJob(msg),
        // Each pull request leaves in the same socket write as the record writes and acks of its turn.
        turn,
        // Left unacked: JetStream redelivers it after the ack wait.
        onError: async (err) => {
          deps.log.warn({ err: errorText(err) }, 'handling a webhook job failed; backing off');
          await clock.sleep(settings.errorBackoffMs).catch(() => {});
        },
      });
      running = true;
      deps.log.info({ concurrency: settings.concurrency }, 'webhook dispatcher started');
    },
    async stop(boundMs) {
      if (!running || !pulling) return;
      running = false;
      const loop = pulling;
      loop.stop();
      const all = loop.done;
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<'bound'>((resolve) => {
        timer = setTimeout(() => resolve('bound'), boundMs);
      });
      const r = await Promise.race([all.then(() => 'done' as const), bound]);
      clearTimeout(timer);
      // The last pull ended with the loop's stop, its subscription with it; this ends the status listener.
      pulls?.close();
      if (r === 'bound')
        deps.log.warn({ inFlight: loop.inFlight(), boundMs }, 'stop bound passed with attempts in flight');
      else deps.log.info('webhook dispatcher stopped');
      // Kept-alive connections to receivers; an attempt still running past the bound keeps its own
      // until it ends (it is bounded by the attempt timeout).
      const closing = transport.close?.();
      if (r === 'done') await closing;
    },
    inFlight: () => pulling?.inFlight() ?? 0,
  };
}
