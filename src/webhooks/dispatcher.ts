/**
 * The webhook dispatcher: pulls delivery jobs from the shared durable WEBHOOKS consumer and makes one
 * attempt per JetStream delivery. Retries are JetStream redeliveries (`nak(delay)`), so a dispatcher
 * that dies between attempts loses nothing; the attempt count lives in the delivery record, which is
 * written before each attempt starts, so a dispatcher that dies during an attempt cannot cause a 4th.
 */
import { type Consumer, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Registry } from 'prom-client';
import { type Clock, systemClock } from '../shared/clock.ts';
import { WEBHOOKS_STREAM } from '../shared/contracts/messaging.ts';
import type { Logger } from '../shared/log.ts';
import type { SecretBox } from '../shared/secretbox.ts';
import { createDeliveryStore } from './deliveries.ts';
import { createJobHandler, type JobMessage } from './handle-job.ts';
import { createHttpTransport, type DeliveryTransport } from './http-transport.ts';
import { createWebhookMetrics } from './metrics.ts';
import type { WebhookSettings } from './settings.ts';
import { createSsrfGuard, errorText, type ResolveHost, systemResolveHost } from './ssrf.ts';
import { openDeliveriesBucket, WEBHOOKS_CONSUMER } from './stream.ts';

export { INTERRUPTED_ATTEMPT, MAX_DELIVERIES, parseWebhookJob } from './handle-job.ts';

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
  let running = false;
  let inFlight = 0;
  const loops: Promise<void>[] = [];
  const batches = new Set<{ stop(err?: Error): void }>();

  async function loop(consumer: Consumer) {
    while (running) {
      try {
        const batch = await consumer.fetch({ max_messages: 1, expires: settings.pullExpiresMs });
        batches.add(batch);
        try {
          for await (const msg of batch) {
            if (!running) {
              msg.nak();
              continue;
            }
            inFlight++;
            try {
              await (handle as (msg: JobMessage) => Promise<void>)(msg);
            } finally {
              inFlight--;
            }
          }
        } finally {
          batches.delete(batch);
        }
      } catch (err) {
        if (!running) break;
        deps.log.warn({ err: errorText(err) }, 'pulling webhook jobs failed; backing off');
        await clock.sleep(settings.errorBackoffMs).catch(() => {});
      }
    }
  }

  return {
    async start() {
      if (running) return;
      if (!handle) {
        const kv = deps.deliveriesKv ?? (await openDeliveriesBucket(await jetstreamManager(deps.nc)));
        handle = createJobHandler({
          store: createDeliveryStore(kv),
          transport,
          secretBox: deps.secretBox,
          log: deps.log,
          metrics,
          clock,
          retryDelayMs: settings.retryDelayMs,
          errorBackoffMs: settings.errorBackoffMs,
        });
      }
      const consumer = await jetstream(deps.nc).consumers.get(WEBHOOKS_STREAM, WEBHOOKS_CONSUMER);
      running = true;
      for (let i = 0; i < settings.concurrency; i++) loops.push(loop(consumer));
      deps.log.info({ concurrency: settings.concurrency }, 'webhook dispatcher started');
    },
    async stop(boundMs) {
      if (!running) return;
      running = false;
      for (const b of batches) b.stop();
      const all = Promise.all(loops.splice(0));
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<'bound'>((resolve) => {
        timer = setTimeout(() => resolve('bound'), boundMs);
      });
      const r = await Promise.race([all.then(() => 'done' as const), bound]);
      clearTimeout(timer);
      if (r === 'bound') deps.log.warn({ inFlight, boundMs }, 'stop bound passed with attempts in flight');
      else deps.log.info('webhook dispatcher stopped');
    },
    inFlight: () => inFlight,
  };
}
