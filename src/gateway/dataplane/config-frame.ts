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
 * What the `config` frame carries, already parsed: from GatewayEnv in a cluster (`dataPlaneSettings`),
 * from `apphost dev`'s options in local mode.
 */
export interface DataPlaneSettings {
  /** Where the data plane listens (a port of 0 is chosen by `startNativeFront` before it is sent). */
  host: string;
  port: number;
  gateway: GatewaySettings;
  balancer: BalancerSettings;
  routing: ConfigMessage['balancer']['routing'];
  /** APPHOST_GATEWAY_CONNECTION_HANDOVER_MS. */
  connectionHandoverMs: number;
  /** The gateway's run-token cache (`cachedRunTokenVerifier`): what Node remembers, the data plane keeps. */
  tokenCache: { ttlMs: number; maxEntries: number };
  loadReportIntervalMs: number;
  logLevel: ConfigMessage['logLevel'];
}

export function dataPlaneSettings(env: GatewayEnv): DataPlaneSettings {
  return {
    host: env.APPHOST_GATEWAY_HOST,
    port: env.APPHOST_GATEWAY_PORT,
    gateway: gatewaySettings(env),
    balancer: balancerSettings(env),
    routing: env.APPHOST_GATEWAY_ROUTING,
    connectionHandoverMs: env.APPHOST_GATEWAY_CONNECTION_HANDOVER_MS,
    tokenCache: {
      ttlMs: env.APPHOST_RUN_TOKEN_CACHE_TTL_MS,
      maxEntries: env.APPHOST_RUN_TOKEN_CACHE_MAX_ENTRIES,
    },
    loadReportIntervalMs: env.APPHOST_LOAD_REPORT_INTERVAL_MS,
    logLevel: env.APPHOST_LOG_LEVEL,
  };
}

/** `configFrame` of the settings GatewayEnv gives. */
export function dataPlaneConfig(
  env: GatewayEnv,
  handoffSocket: string,
  replicasReported = true,
): ConfigMessage {
  return configFrame(dataPlaneSettings(env), handoffSocket, replicasReported);
}

/**
 * `replicasReported`: whether the gateway's resolver reports replicas (`watchReplicas`). Without it Node's
 * balancer calls the app's upstream while it is ready (`createAppCaller`'s `replicasReported: false`),
 * whatever APPHOST_GATEWAY_ROUTING says, and the data plane must do the same: it is told `service`, the
 * routing in which it does so (the feed sends it no replicas either way).
 */
export function configFrame(
  s: DataPlaneSettings,
  handoffSocket: string,
  replicasReported = true,
): ConfigMessage {
  return {
    type: 'config',
    listen: { host: s.host, port: s.port },
    handoffSocket,
    gateway: gatewayFrame(s.gateway, s.balancer, s.connectionHandoverMs),
    balancer: balancerFrame(s.balancer, replicasReported ? s.routing : 'service'),
    tokenCacheMaxEntries: s.tokenCache.ttlMs > 0 ? s.tokenCache.maxEntries : 0,
    loadReportIntervalMs: s.loadReportIntervalMs,
    logLevel: s.logLevel,
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
