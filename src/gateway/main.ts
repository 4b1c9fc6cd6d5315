/** `apphost gateway`: the run endpoint and (unless APPHOST_RUN_WORKER=false) the async run worker. */
import { KubeConfig } from '@kubernetes/client-node';
import { createLogger } from '../shared/log.ts';
import { onShutdownSignal } from '../shared/shutdown.ts';
import { parseGatewayEnv } from './config.ts';
import { createKubeAppResolver } from './resolver/kube.ts';
import { serveGateway } from './serve.ts';

export async function main(env: NodeJS.ProcessEnv): Promise<void> {
  const cfg = parseGatewayEnv(env);
  const log = createLogger({ name: 'apphost-gateway', level: cfg.APPHOST_LOG_LEVEL });
  const kc = new KubeConfig();
  if (env.KUBECONFIG) kc.loadFromFile(env.KUBECONFIG);
  else kc.loadFromCluster();
  const resolver = createKubeAppResolver({ kc, log: log.child({ component: 'resolver' }) });
  await resolver.start();
  const proc = await serveGateway({ env: cfg, resolver, log });
  onShutdownSignal(log, proc.shutdownBoundMs, [
    ...proc.shutdownSteps(),
    { name: 'stop watches', run: () => resolver.stop() },
  ]);
}
