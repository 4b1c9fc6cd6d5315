/**
 * `apphost webhooks`: the webhook dispatcher as its own process (one Deployment, any number of
 * replicas sharing the durable consumer). Reads env, builds real dependencies, installs shutdown.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { resolveReplicas } from '../shared/jetstream-replicas.ts';
import { retryJetStreamSetup } from '../shared/jetstream-setup.ts';
import { createLogger } from '../shared/log.ts';
import { natsClientOptions } from '../shared/nats-url.ts';
import { startOpsServer } from '../shared/ops.ts';
import { createSecretBox } from '../shared/secretbox.ts';
import { onShutdownSignal } from '../shared/shutdown.ts';
import { createWebhookDispatcher } from './dispatcher.ts';
import { readWebhooksEnv, webhookSettings } from './settings.ts';
import { ensureWebhooksStream, openDeliveriesBucket } from './stream.ts';

export async function main(env: NodeJS.ProcessEnv): Promise<void> {
  const e = readWebhooksEnv(env);
  const settings = webhookSettings(e);
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
  const replicas = resolveReplicas(e.APPHOST_NATS_REPLICAS, nc);
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
