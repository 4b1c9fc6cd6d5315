/** `apphost gateway`: the run endpoint and (unless APPHOST_RUN_WORKER=false) the async run worker. */

import { clusterDomain } from '../shared/kube/cluster-domain.ts';
import { loadKubeConfig } from '../shared/kube/config.ts';
import { readResolvConf } from '../shared/kube/resolv-conf.ts';
import { createLogger } from '../shared/log.ts';
import { onShutdownSignal } from '../shared/shutdown.ts';
import { parseGatewayEnv } from './config.ts';
import { createFunctionsCache } from './resolver/functions.ts';
import { createKubeAppResolver } from './resolver/kube.ts';
import { watchKeySetSecret } from './run-token-keys.ts';
import { serveGateway } from './serve.ts';

export async function main(env: NodeJS.ProcessEnv): Promise<void> {
  const cfg = parseGatewayEnv(env);
  const log = createLogger({ name: 'apphost-gateway', level: cfg.APPHOST_LOG_LEVEL });
  const kc = loadKubeConfig(cfg.KUBECONFIG);
  const resolverLog = log.child({ component: 'resolver' });
  const functions =
    cfg.APPHOST_GATEWAY_FUNCTIONS_TTL_MS > 0
      ? createFunctionsCache({
          log: resolverLog,
          timeoutMs: cfg.APPHOST_GATEWAY_FUNCTIONS_TIMEOUT_MS,
          ttlMs: cfg.APPHOST_GATEWAY_FUNCTIONS_TTL_MS,
        })
      : undefined;
  const resolver = createKubeAppResolver({
    kc,
    log: resolverLog,
    routing: cfg.APPHOST_GATEWAY_ROUTING,
    clusterDomain: clusterDomain(cfg.APPHOST_CLUSTER_DOMAIN, readResolvConf),
    ...(functions ? { functions } : {}),
  });
  await resolver.start();
  // The key Secret through the API unless a file is named (docs/gateway.md).
  const keys = cfg.APPHOST_RUN_TOKEN_KEYS_FILE
    ? undefined
    : watchKeySetSecret({
        kc,
        namespace: cfg.APPHOST_RUN_TOKEN_KEYS_NAMESPACE,
        log: log.child({ component: 'run-token-keys' }),
      });
  const proc = await serveGateway({ env: cfg, resolver, log, ...(keys ? { keys } : {}) });
  onShutdownSignal(log, proc.shutdownBoundMs, [
    ...proc.shutdownSteps(),
    { name: 'stop watches', run: () => resolver.stop() },
    { name: 'close functions lookups', run: async () => functions?.close() },
  ]);
}
