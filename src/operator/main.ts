/**
 * `apphost operator`: reads the environment, builds the real dependencies, starts the operator and
 * its ops server (/healthz, /readyz, /metrics), and stops gracefully on SIGTERM.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { z } from 'zod';
import { createLogger } from '../shared/log.ts';
import { startOpsServer } from '../shared/ops.ts';
import { onShutdownSignal } from '../shared/shutdown.ts';
import { createOperator } from './operator.ts';
import { operatorSettingsFromEnv } from './settings.ts';

const MainEnv = z.object({
  APPHOST_LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  APPHOST_OPS_PORT: z.coerce.number().int().min(0).max(65535).default(9090),
  KUBECONFIG: z.string().optional(),
});

export async function main(env: NodeJS.ProcessEnv): Promise<void> {
  const e = MainEnv.parse(env);
  const settings = operatorSettingsFromEnv(env);
  const log = createLogger({ name: 'apphost-operator', level: e.APPHOST_LOG_LEVEL });
  const kc = new KubeConfig();
  if (e.KUBECONFIG) kc.loadFromFile(e.KUBECONFIG.split(':')[0] ?? e.KUBECONFIG);
  else kc.loadFromCluster();

  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const operator = createOperator({ kc, log, registry, settings });
  const ops = await startOpsServer({
    port: e.APPHOST_OPS_PORT,
    registry,
    checks: [{ name: 'caches', check: () => operator.ready() }],
  });
  onShutdownSignal(log, settings.shutdownTimeoutMs, [
    { name: 'drain', run: async () => ops.drain() },
    { name: 'operator', run: () => operator.stop() },
    { name: 'ops server', run: () => ops.close() },
  ]);
  log.info({ opsPort: ops.port(), identity: settings.leaderElection.identity }, 'operator starting');
  await operator.start();
}
