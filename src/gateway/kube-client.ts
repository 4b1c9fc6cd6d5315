/** The gateway's Kubernetes client (its own module: loading client-node is left to those who need it). */
import type { KubeConfig } from '@kubernetes/client-node';
import { createKubeClient, type KubeClient } from '../shared/kube/client.ts';
import type { GatewayKubeSettings } from './kube-settings.ts';

/** The gateway only reads; the name shows as its user agent in the API server's logs. */
const GATEWAY_CLIENT = 'apphost-gateway';

export function gatewayKubeClient(kc: KubeConfig, s: GatewayKubeSettings): KubeClient {
  return createKubeClient(kc, {
    fieldManager: GATEWAY_CLIENT,
    requestTimeoutMs: s.requestTimeoutMs,
    watchIdleTimeoutMs: s.watchIdleTimeoutMs,
  });
}
