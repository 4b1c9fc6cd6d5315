/**
 * A run worker as its own process (the gateway's worker without its HTTP server), for the chaos test:
 * settings from the gateway's environment, a static resolver from APPHOST_TEST_APPS. Prints `ready`.
 */
import { connect } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { parseGatewayEnv, runWorkerSettings } from '../../src/gateway/config.ts';
import { createRunWorker } from '../../src/runs/worker.ts';
import type { ResolvedApp } from '../../src/shared/contracts/seams.ts';
import { createLogger } from '../../src/shared/log.ts';
import { resolveReplicas } from '../../src/shared/nats/replicas.ts';
import { retryJetStreamSetup } from '../../src/shared/nats/setup.ts';
import { natsClientOptions } from '../../src/shared/nats/url.ts';
import { onShutdownSignal } from '../../src/shared/shutdown.ts';
import { staticResolver } from '../integration/gateway/helpers.ts';

const env = parseGatewayEnv(process.env);
const log = createLogger({ name: 'chaos-worker', level: env.APPHOST_LOG_LEVEL });
const apps = JSON.parse(process.env.APPHOST_TEST_APPS ?? '[]') as ResolvedApp[];
const nc = await connect({
  ...natsClientOptions(env.NATS_URL),
  name: 'chaos-worker',
  maxReconnectAttempts: -1,
  timeout: 30_000,
});
const worker = createRunWorker({
  nc,
  resolver: staticResolver(apps),
  log,
  registry: new Registry(),
  settings: runWorkerSettings(env),
  replicas: resolveReplicas(env.APPHOST_NATS_REPLICAS, nc),
});
await retryJetStreamSetup('starting the run worker', () => worker.start(), { boundMs: 60_000, log });
onShutdownSignal(log, env.APPHOST_RUN_STOP_TIMEOUT_MS + 5_000, [
  { name: 'stop run worker', run: () => worker.stop(env.APPHOST_RUN_STOP_TIMEOUT_MS) },
  { name: 'drain nats', run: () => nc.drain() },
]);
process.stdout.write('ready\n');
