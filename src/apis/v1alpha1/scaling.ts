/**
 * An App's scaling settings with every default filled in: one place states the defaults, and the
 * gateway's balancer, the operator's autoscaler and local mode all read them through `effectiveScaling`.
 * The CRD (crds/apphost.dev_apps.yaml) states the same defaults and ranges.
 */
import type { AppSpec } from './types.ts';

export const DEFAULT_MIN_REPLICAS = 1;
/** Used when maxReplicas is not set (raised to minReplicas when that is larger). */
export const DEFAULT_MAX_REPLICAS = 10;
export const DEFAULT_REPLICA_CONCURRENCY = 100;
/** Percent of replicaConcurrency the autoscaler aims for (Knative's default target utilization). */
export const DEFAULT_TARGET_UTILIZATION = 70;
export const DEFAULT_SCALING_BUFFER = 0;
export const DEFAULT_COOLDOWN_SECONDS = 60;

export interface EffectiveScaling {
  minReplicas: number;
  maxReplicas: number;
  /** Calls one replica serves at once: a hard limit, enforced by the gateway and the runtime. */
  replicaConcurrency: number;
  /** Percent (1–100) of replicaConcurrency the autoscaler aims to use per replica. */
  targetUtilization: number;
  /** Replicas added on top of what the load needs, while there is load. */
  scalingBuffer: number;
  /** How long the load must stay lower before replicas are removed. */
  cooldownSeconds: number;
}

export function effectiveScaling(scaling: AppSpec['scaling']): EffectiveScaling {
  const s = scaling ?? {};
  const minReplicas = s.minReplicas ?? DEFAULT_MIN_REPLICAS;
  return {
    minReplicas,
    maxReplicas: Math.max(s.maxReplicas ?? DEFAULT_MAX_REPLICAS, minReplicas, 1),
    replicaConcurrency: s.replicaConcurrency ?? DEFAULT_REPLICA_CONCURRENCY,
    targetUtilization: s.targetUtilization ?? DEFAULT_TARGET_UTILIZATION,
    scalingBuffer: s.scalingBuffer ?? DEFAULT_SCALING_BUFFER,
    cooldownSeconds: s.cooldownSeconds ?? DEFAULT_COOLDOWN_SECONDS,
  };
}
