/**
 * `apphost webhooks`: the webhook dispatcher as its own process (one Deployment, any number of
 * replicas sharing the durable consumer). Reads env, builds real dependencies, installs shutdown.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { z } from 'zod';
import { parseReplicasSetting, resolveReplicas } from '../shared/jetstream-replicas.ts';
import { retryJetStreamSetup } from '../shared/jetstream-setup.ts';
import { createLogger } from '../shared/log.ts';
import { natsClientOptions } from '../shared/nats-url.ts';
import { startOpsServer } from '../shared/ops.ts';
import { createSecretBox } from '../shared/secretbox.ts';
import { onShutdownSignal } from '../shared/shutdown.ts';
import { createWebhookDispatcher } from './dispatcher.ts';
import { parseWebhookSettings } from './settings.ts';
import { ensureWebhooksStream, openDeliveriesBucket } from './stream.ts';

const EnvSchema = z.object({
  NATS_URL: z.string().min(1).default('nats://127.0.0.1:4222'),
  APPHOST_LOG_LEVEL: z.string().default('info'),
  APPHOST_OPS_PORT: z.coerce.number().int().min(0).max(65_535).default(9090),
  APPHOST_PLATFORM_KEY: z.string().min(16, 'APPHOST_PLATFORM_KEY must be at least 16 characters'),
  /** `auto` (min(3, NATS cluster size)) or 1..5: copies of WEBHOOKS and the deliveries bucket. */
  APPHOST_NATS_REPLICAS: z.string().optional(),
  /** Bound on start-up: connecting to NATS and creating the stream. */
  APPHOST_WEBHOOK_STARTUP_TIMEOUT_MS: z.coerce.number().int().min(1_000).default(30_000),
  /** Bound on SIGTERM: in-flight attempts get this long to finish (then JetStream redelivers them). */
  APPHOST_WEBHOOK_STOP_BOUND_MS: z.coerce.number().int().min(0).default(20_000),
});

export async function main(env: NodeJS.ProcessEnv): Promise<void> {
  const e = EnvSchema.parse(env);
  const settings = parseWebhookSettings(env);
  const log = createLogger({ name: 'webhooks', level: e.APPHOST_LOG_LEVEL });
  const registry = new Registry();

  const nc = await connect({
    ...natsClientOptions(e.NATS_URL),
    name: 'apphost-webhooks',
    maxReconnectAttempts: -1,
    timeout: e.APPHOST_WEBHOOK_STARTUP_TIMEOUT_MS,
  });
  let natsConnected = true;
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') natsConnected = false;
      else if (s.type === 'reconnect') natsConnected = true;
    }
  })();
  const replicas = resolveReplicas(parseReplicasSetting(e.APPHOST_NATS_REPLICAS), nc);
  const deliveriesKv = await retryJetStreamSetup(
    'creating the WEBHOOKS stream, consumer and deliveries bucket',
    async () => {
      const jsm = await jetstreamManager(nc);
      await ensureWebhooksStream(jsm, replicas);
      return openDeliveriesBucket(jsm, replicas);
    },
    { boundMs: e.APPHOST_WEBHOOK_STARTUP_TIMEOUT_MS, log },
  );

  const dispatcher = createWebhookDispatcher({
    nc,
    secretBox: createSecretBox(e.APPHOST_PLATFORM_KEY),
    log,
    registry,
    settings,
    deliveriesKv,
  });
  await retryJetStreamSetup('starting the dispatcher', () => dispatcher.start(), {
    boundMs: e.APPHOST_WEBHOOK_STARTUP_TIMEOUT_MS,
    log,
  });
  const ops = await startOpsServer({
    port: e.APPHOST_OPS_PORT,
    registry,
    checks: [{ name: 'nats', check: () => natsConnected && !nc.isClosed() }],
  });
  log.info(
    {
      opsPort: ops.port(),
      allowCidrs: settings.allowCidrs,
      attemptTimeoutMs: settings.attemptTimeoutMs,
      retryDelayMs: settings.retryDelayMs,
      concurrency: settings.concurrency,
    },
    'webhook dispatcher ready',
  );

  onShutdownSignal(log, e.APPHOST_WEBHOOK_STOP_BOUND_MS + 5_000, [
    { name: 'not ready', run: async () => ops.drain() },
    { name: 'finish attempts', run: () => dispatcher.stop(e.APPHOST_WEBHOOK_STOP_BOUND_MS) },
    { name: 'close nats', run: () => nc.drain() },
    { name: 'close ops', run: () => ops.close() },
  ]);
}
