/**
 * The `config` frame (design §4): the settings Node already parsed, as the data plane takes them. The
 * data plane reads none of these from its environment.
 */
import { balancerSettings, type GatewayEnv, gatewaySettings } from '../config.ts';
import type { ConfigMessage } from './protocol.ts';

/**
 * Added by the data plane to the cold-start and sync bounds on Node's answer head to a hand-off
 * (design §3): Node's own bounds answer first, this only catches a Node that does not answer.
 */
export const HANDOFF_MARGIN_MS = 5_000;

export function dataPlaneConfig(env: GatewayEnv, handoffSocket: string): ConfigMessage {
  const g = gatewaySettings(env);
  const b = balancerSettings(env);
  return {
    type: 'config',
    listen: { host: env.APPHOST_GATEWAY_HOST, port: env.APPHOST_GATEWAY_PORT },
    handoffSocket,
    gateway: {
      maxBodyBytes: g.maxBodyBytes,
      syncTimeoutMs: g.syncTimeoutMs,
      streamIdleTimeoutMs: g.streamIdleTimeoutMs,
      retryAfterSeconds: g.retryAfterSeconds,
      drainTimeoutMs: g.drainTimeoutMs,
      connectionHandoverMs: env.APPHOST_GATEWAY_CONNECTION_HANDOVER_MS,
      coldStartTimeoutMs: b.coldStartTimeoutMs,
      handoffMarginMs: HANDOFF_MARGIN_MS,
      syncRecordsPerAppPerSecond: g.syncRecordsPerAppPerSecond,
      syncRecordsPerSecond: g.syncRecordsPerSecond,
    },
    balancer: {
      queueTimeoutMs: b.queueTimeoutMs,
      queueDepthFactor: b.queueDepthFactor,
      maxQueuePerApp: b.maxQueuePerApp,
      capacityBlockMs: b.capacityBlockMs,
      unreachableBlockMs: b.unreachableBlockMs,
      maxRetries: b.maxRetries,
      retryAfterSeconds: b.retryAfterSeconds,
      routing: env.APPHOST_GATEWAY_ROUTING,
    },
    tokenCacheMaxEntries:
      env.APPHOST_RUN_TOKEN_CACHE_TTL_MS > 0 ? env.APPHOST_RUN_TOKEN_CACHE_MAX_ENTRIES : 0,
    loadReportIntervalMs: env.APPHOST_LOAD_REPORT_INTERVAL_MS,
    logLevel: env.APPHOST_LOG_LEVEL,
  };
}
