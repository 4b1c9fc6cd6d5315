/**
 * The gateway's Kubernetes client. The gateway only reads (list/watch of its caches, the key Secret), so
 * it uses the small reader on undici (src/shared/kube/reader.ts) with the access src/shared/kube/access.ts
 * loads — not @kubernetes/client-node, whose ~870 generated modules cost a gateway ~40 MiB of its idle
 * memory (docs/benchmarks.md). A kubeconfig that needs what that loader does not do (exec or auth-provider
 * credentials, basic auth, a proxy) gets client-node instead, loaded only then.
 */
import { isUnsupported, type KubeAccess, type KubeAccessEnv, loadKubeAccess } from '../shared/kube/access.ts';
import { type ClosableKubeReader, createKubeReader } from '../shared/kube/reader.ts';
import type { Logger } from '../shared/log.ts';
import type { GatewayKubeSettings } from './kube-settings.ts';

/** The gateway only reads; the name shows as its user agent in the API server's logs. */
export const GATEWAY_CLIENT = 'apphost-gateway';

export function gatewayKubeReader(access: KubeAccess, s: GatewayKubeSettings): ClosableKubeReader {
  return createKubeReader(access, {
    userAgent: GATEWAY_CLIENT,
    requestTimeoutMs: s.requestTimeoutMs,
    watchIdleTimeoutMs: s.watchIdleTimeoutMs,
  });
}

/** The client from the piece's KUBECONFIG setting, else `~/.kube/config`, else the pod's service account. */
export async function loadGatewayKubeReader(opts: {
  kubeconfig: string | undefined;
  env: KubeAccessEnv;
  home: string | undefined;
  settings: GatewayKubeSettings;
  log: Logger;
}): Promise<ClosableKubeReader> {
  const access = await loadKubeAccess({ kubeconfig: opts.kubeconfig, env: opts.env, home: opts.home });
  if (!isUnsupported(access)) {
    opts.log.info({ kubeconfig: access.source, server: access.server }, 'kubernetes access loaded');
    return gatewayKubeReader(access, opts.settings);
  }
  opts.log.info(
    { kubeconfig: access.source, needs: access.unsupported },
    'kubeconfig needs @kubernetes/client-node: using it',
  );
  const [{ loadKubeConfig }, { createKubeClient }] = await Promise.all([
    import('../shared/kube/config.ts'),
    import('../shared/kube/client.ts'),
  ]);
  const client = createKubeClient(loadKubeConfig(access.source), {
    fieldManager: GATEWAY_CLIENT,
    requestTimeoutMs: opts.settings.requestTimeoutMs,
    watchIdleTimeoutMs: opts.settings.watchIdleTimeoutMs,
  });
  // The fallback's connections are client-node's shared Agent (connection.ts), kept alive for the process's
  // life; they end with the process, after the gateway's other shutdown steps.
  return { get: client.get, list: client.list, watch: client.watch, close: async () => {} };
}
