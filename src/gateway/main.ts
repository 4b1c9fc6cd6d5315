/**
 * `apphost gateway`: the run endpoint and (unless APPHOST_RUN_WORKER=false) the async run worker —
 * as one process, or (APPHOST_GATEWAY_PROCESSES > 1) as a primary supervising that many gateway
 * processes on one port (processes.ts). The primary loads none of the gateway's own modules.
 */

import { availableParallelism } from 'node:os';
import { createLogger, type Logger } from '../shared/log.ts';
import { onShutdownSignal } from '../shared/shutdown.ts';
import { releaseStartupHeap } from '../shared/startup-heap.ts';
import { type GatewayEnv, gatewayKubeSettings, parseGatewayEnv } from './config.ts';
import { gatewayProcessCount, PROCESS_INDEX_ENV, runGateway } from './processes.ts';

export async function main(env: NodeJS.ProcessEnv): Promise<void> {
  const cfg = parseGatewayEnv(env);
  const log = createLogger({ name: 'apphost-gateway', level: cfg.APPHOST_LOG_LEVEL });
  const run = await runGateway({
    env: cfg,
    log,
    // `auto`: libuv's count, which honours the pod's CPU limit (cgroup quota, rounded down).
    processes: gatewayProcessCount(cfg.APPHOST_GATEWAY_PROCESSES, availableParallelism()),
    processIndex: env[PROCESS_INDEX_ENV],
    serve: (o) => serveFromCluster(cfg, env, log, o.ops),
    // A process whose primary died shuts down as on SIGTERM rather than serve unsupervised.
    onPrimaryGone: () => process.kill(process.pid, 'SIGTERM'),
  });
  onShutdownSignal(log, run.shutdownBoundMs, run.shutdownSteps, run.signals);
  // Whatever its role: the primary of several processes has its own start-up heap too.
  releaseStartupHeap(globalThis.gc);
}

/** One gateway process with the cluster's resolver and key Secret watch. */
async function serveFromCluster(cfg: GatewayEnv, env: NodeJS.ProcessEnv, log: Logger, ops: boolean) {
  const [
    { clusterDomain },
    { readResolvConf },
    { createFunctionsCache },
    { createKubeAppResolver },
    { watchKeySetSecret },
    { serveGateway },
    { loadGatewayKubeReader },
  ] = await Promise.all([
    import('../shared/kube/cluster-domain.ts'),
    import('../shared/kube/resolv-conf.ts'),
    import('./resolver/functions.ts'),
    import('./resolver/kube.ts'),
    import('./run-token-keys.ts'),
    import('./serve.ts'),
    import('./kube-client.ts'),
  ]);
  const kube = gatewayKubeSettings(cfg);
  const client = await loadGatewayKubeReader({
    kubeconfig: cfg.KUBECONFIG,
    // The kubelet's variables for in-cluster access, and HOME for ~/.kube/config (as kubectl).
    env: {
      KUBERNETES_SERVICE_HOST: env.KUBERNETES_SERVICE_HOST,
      KUBERNETES_SERVICE_PORT: env.KUBERNETES_SERVICE_PORT,
    },
    home: env.HOME,
    settings: kube,
    log: log.child({ component: 'kube' }),
  });
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
    client,
    kube,
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
        client,
        settings: kube,
        namespace: cfg.APPHOST_RUN_TOKEN_KEYS_NAMESPACE,
        log: log.child({ component: 'run-token-keys' }),
      });
  const proc = await serveGateway({ env: cfg, resolver, log, ops, ...(keys ? { keys } : {}) });
  return {
    proc,
    steps: [
      { name: 'stop watches', run: () => resolver.stop() },
      { name: 'close functions lookups', run: async () => functions?.close() },
      { name: 'close kube connections', run: () => client.close() },
    ],
  };
}
