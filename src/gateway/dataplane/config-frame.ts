/**
 * The `config` frame (design §4): the settings Node already parsed, as the data plane takes them. The
 * data plane reads none of these from its environment.
 */
import type { BalancerSettings } from '../balancer/balancer.ts';
import { balancerSettings, type GatewayEnv, gatewaySettings } from '../config.ts';
import type { GatewaySettings } from '../settings.ts';
import type { ConfigMessage } from './protocol.ts';

/**
 * Added by the data plane to the cold-start and sync bounds on Node's answer head to a hand-off
 * (design §3): Node's own bounds answer first, this only catches a Node that does not answer.
 */
export const HANDOFF_MARGIN_MS = 5_000;

/**
 * `replicasReported`: whether the gateway's resolver reports replicas (`watchReplicas`). Without it Node's
 * balancer calls the app's upstream while it is ready (`createAppCaller`'s `replicasReported: false`),
 * whatever APPHOST_GATEWAY_ROUTING says, and the data plane must do the same: it is told `service`, the
 * routing in which it does so (the feed sends it no replicas either way).
 */
export function dataPlaneConfig(
  env: GatewayEnv,
  handoffSocket: string,
  replicasReported = true,
): ConfigMessage {
  const b = balancerSettings(env);
  return {
    type: 'config',
    listen: { host: env.APPHOST_GATEWAY_HOST, port: env.APPHOST_GATEWAY_PORT },
    handoffSocket,
    gateway: gatewayFrame(gatewaySettings(env), b, env.APPHOST_GATEWAY_CONNECTION_HANDOVER_MS),
    balancer: balancerFrame(b, replicasReported ? env.APPHOST_GATEWAY_ROUTING : 'service'),
    tokenCacheMaxEntries:
      env.APPHOST_RUN_TOKEN_CACHE_TTL_MS > 0 ? env.APPHOST_RUN_TOKEN_CACHE_MAX_ENTRIES : 0,
    loadReportIntervalMs: env.APPHOST_LOAD_REPORT_INTERVAL_MS,
    logLevel: env.APPHOST_LOG_LEVEL,
  };
}

/** The config frame's `gateway` part, from parsed settings (test suites pass their own). */
export function gatewayFrame(
  g: GatewaySettings,
  b: BalancerSettings,
  connectionHandoverMs: number,
): ConfigMessage['gateway'] {
  return {
    maxBodyBytes: g.maxBodyBytes,
    syncTimeoutMs: g.syncTimeoutMs,
    streamIdleTimeoutMs: g.streamIdleTimeoutMs,
    retryAfterSeconds: g.retryAfterSeconds,
    drainTimeoutMs: g.drainTimeoutMs,
    connectionHandoverMs,
    coldStartTimeoutMs: b.coldStartTimeoutMs,
    handoffMarginMs: HANDOFF_MARGIN_MS,
    syncRecordsPerAppPerSecond: g.syncRecordsPerAppPerSecond,
    syncRecordsPerSecond: g.syncRecordsPerSecond,
  };
}

/** The config frame's `balancer` part. */
export function balancerFrame(
  b: BalancerSettings,
  routing: ConfigMessage['balancer']['routing'],
): ConfigMessage['balancer'] {
  return {
    queueTimeoutMs: b.queueTimeoutMs,
    queueDepthFactor: b.queueDepthFactor,
    maxQueuePerApp: b.maxQueuePerApp,
    capacityBlockMs: b.capacityBlockMs,
    unreachableBlockMs: b.unreachableBlockMs,
    maxRetries: b.maxRetries,
    retryAfterSeconds: b.retryAfterSeconds,
    routing,
  };
}
