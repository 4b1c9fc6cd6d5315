/**
 * `apphost webhooks`: the webhook dispatcher as its own process (one Deployment, any number of
 * replicas sharing the durable consumer). Reads env, builds real dependencies, installs shutdown.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { Registry } from 'prom-client';
import { createLogger } from '../shared/log.ts';
import { connectNats } from '../shared/nats/connect.ts';
import { resolveReplicas } from '../shared/nats/replicas.ts';
import { retryJetStreamSetup } from '../shared/nats/setup.ts';
import { startOpsServer } from '../shared/ops.ts';
import { createSecretBox } from '../shared/secretbox.ts';
import { onShutdownSignal } from '../shared/shutdown.ts';
import { createWebhookDispatcher } from './dispatcher.ts';
import { readWebhooksEnv, webhookSettings, webhooksShutdownBoundMs } from './settings.ts';
import { openDeliveriesBucket } from './stream.ts';

export async function main(env: NodeJS.ProcessEnv): Promise<void> {
  const e = readWebhooksEnv(env);
  const settings = webhookSettings(e);
  const log = createLogger({ name: 'webhooks', level: e.APPHOST_LOG_LEVEL });
  const registry = new Registry();

  const nats = await connectNats({
    url: e.NATS_URL,
    name: 'apphost-webhooks',
    timeoutMs: e.APPHOST_WEBHOOK_STARTUP_TIMEOUT_MS,
    // Right after an install the NATS servers may not listen yet: wait instead of exiting.
    waitOnFirstConnect: true,
    firstConnectBoundMs: e.APPHOST_WEBHOOK_STARTUP_TIMEOUT_MS,
    log: log.child({ component: 'nats' }),
  });
  const { nc } = nats;
  const replicas = resolveReplicas(e.APPHOST_NATS_REPLICAS, nc);
  const deliveriesKv = await retryJetStreamSetup(
    'creating the deliveries bucket',
    // The bucket the dispatcher writes; its consumer (and the stream under it) it ensures in start().
    async () => openDeliveriesBucket(await jetstreamManager(nc), replicas),
    { boundMs: e.APPHOST_WEBHOOK_STARTUP_TIMEOUT_MS, log },
  );

  const dispatcher = createWebhookDispatcher({
    nc,
    secretBox: createSecretBox(e.APPHOST_PLATFORM_KEY),
    log,
    registry,
    settings,
    deliveriesKv,
    replicas,
  });
  await retryJetStreamSetup('starting the dispatcher', () => dispatcher.start(), {
    boundMs: e.APPHOST_WEBHOOK_STARTUP_TIMEOUT_MS,
    log,
  });
  const ops = await startOpsServer({
    port: e.APPHOST_OPS_PORT,
    registry,
    checks: [nats.readiness],
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

  onShutdownSignal(log, webhooksShutdownBoundMs(e), [
    { name: 'not ready', run: async () => ops.drain() },
    { name: 'finish attempts', run: () => dispatcher.stop(e.APPHOST_WEBHOOK_STOP_BOUND_MS) },
    { name: 'close nats', run: () => nc.drain() },
    { name: 'close ops', run: () => ops.close() },
  ]);
}
