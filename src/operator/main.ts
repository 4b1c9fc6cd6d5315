/**
 * `apphost operator`: reads the environment, builds the real dependencies, starts the operator and
 * its ops server (/healthz, /readyz, /metrics), and stops gracefully on SIGTERM.
 */
import { collectDefaultMetrics, Registry } from 'prom-client';
import { clusterDomain } from '../shared/kube/cluster-domain.ts';
import { loadKubeConfig } from '../shared/kube/config.ts';
import { readResolvConf } from '../shared/kube/resolv-conf.ts';
import { createLogger } from '../shared/log.ts';
import { connectNats, type NatsHandle } from '../shared/nats/connect.ts';
import { startOpsServer } from '../shared/ops.ts';
import { onShutdownSignal } from '../shared/shutdown.ts';
import { createOperator } from './operator.ts';
import { operatorSettings, readOperatorEnv } from './settings.ts';

/** Bound on the first NATS connection attempt at start-up. */
export const NATS_CONNECT_TIMEOUT_MS = 10_000;

export async function main(env: NodeJS.ProcessEnv): Promise<void> {
  const e = readOperatorEnv(env);
  const settings = {
    ...operatorSettings(e),
    clusterDomain: clusterDomain(e.APPHOST_CLUSTER_DOMAIN, readResolvConf),
  };
  const log = createLogger({ name: 'apphost-operator', level: e.APPHOST_LOG_LEVEL });
  const kc = loadKubeConfig(e.KUBECONFIG);

  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // Not awaited: the operator reconciles while NATS is away; the autoscaler starts once connected.
  const nats = connectNats({
    url: e.NATS_URL,
    name: 'apphost-operator',
    timeoutMs: NATS_CONNECT_TIMEOUT_MS,
    waitOnFirstConnect: true,
    log,
  });
  let connected: NatsHandle | undefined;
  nats.then(
    (h) => {
      connected = h;
    },
    (err: unknown) => log.error({ err }, 'NATS unreachable: Apps are not autoscaled'),
  );
  const operator = createOperator({ kc, log, registry, settings, nc: nats.then((h) => h.nc) });
  const ops = await startOpsServer({
    port: e.APPHOST_OPS_PORT,
    registry,
    checks: [{ name: 'caches', check: () => operator.ready() }],
  });
  onShutdownSignal(log, settings.shutdownTimeoutMs, [
    { name: 'drain', run: async () => ops.drain() },
    { name: 'operator', run: () => operator.stop() },
    { name: 'nats', run: async () => connected?.nc.close() },
    { name: 'ops server', run: () => ops.close() },
  ]);
  log.info({ opsPort: ops.port(), identity: settings.leaderElection.identity }, 'operator starting');
  await operator.start();
}
