/**
 * How the gateway reads the cluster (its resolver's caches and the run-token key Secret): one client
 * with bounded requests, and watches that are reopened often enough that a connection which died
 * without closing costs at most `watchIdleTimeoutMs` of stale routing. Env names: docs/gateway.md.
 */
import type { BackoffSettings } from '../shared/backoff.ts';
import type { InformerSettings } from '../shared/kube/informer.ts';

export interface GatewayKubeSettings {
  /** Bound on one API request (each list page). */
  requestTimeoutMs: number;
  /** Server-side bound on one watch; it is then reopened from the last version seen. */
  watchTimeoutSeconds: number;
  /** A watch that receives nothing (no event, no bookmark) this long is ended and reopened. */
  watchIdleTimeoutMs: number;
  /** Bound on the first full list of every cache at start. */
  syncTimeoutMs: number;
  /** Delay before retrying a failed watch (doubling up to the maximum). */
  backoff: BackoffSettings;
}

export const DEFAULT_GATEWAY_KUBE_SETTINGS: GatewayKubeSettings = {
  requestTimeoutMs: 30_000,
  watchTimeoutSeconds: 30,
  watchIdleTimeoutMs: 45_000,
  syncTimeoutMs: 60_000,
  backoff: { baseDelayMs: 500, maxDelayMs: 30_000 },
};

export function gatewayInformerSettings(s: GatewayKubeSettings): InformerSettings {
  // No periodic replay: every change the gateway needs arrives as an event.
  return { resyncPeriodMs: 3_600_000, watchTimeoutSeconds: s.watchTimeoutSeconds, backoff: s.backoff };
}
