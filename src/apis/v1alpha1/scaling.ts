/**
 * An App's scaling settings with every default filled in: one place states the defaults, and the
 * gateway's balancer, the operator's autoscaler and local mode all read them through `effectiveScaling`.
 * The CRD (crds/apphost.dev_apps.yaml) states the same defaults and ranges.
 */
import { z } from 'zod';
import { APP_START_FAILURE_REASONS } from './app-reasons.ts';
import type { App, AppSpec } from './types.ts';

export const DEFAULT_MIN_REPLICAS = 1;
/** Used when maxReplicas is not set (raised to minReplicas when that is larger). */
export const DEFAULT_MAX_REPLICAS = 10;
export const DEFAULT_REPLICA_CONCURRENCY = 100;
/** Percent of replicaConcurrency the autoscaler aims for (Knative's default target utilization). */
export const DEFAULT_TARGET_UTILIZATION = 70;
export const DEFAULT_SCALING_BUFFER = 0;
export const DEFAULT_COOLDOWN_SECONDS = 60;

const int = (min: number, max: number) => z.number().int().min(min).max(max);

/** `spec.scaling` with the CRD's ranges and cross-field rules, for configuration read outside the API server. */
export const ScalingSchema = z
  .object({
    minReplicas: int(0, 1000).optional(),
    maxReplicas: int(1, 1000).optional(),
    replicaConcurrency: int(1, 10_000).optional(),
    targetUtilization: int(1, 100).optional(),
    scalingBuffer: int(0, 100).optional(),
    cooldownSeconds: int(0, 3600).optional(),
  })
  .strict()
  .refine(
    (s) => s.minReplicas === undefined || s.maxReplicas === undefined || s.minReplicas <= s.maxReplicas,
    {
      message: 'minReplicas must not be greater than maxReplicas',
      path: ['minReplicas'],
    },
  )
  .refine(
    (s) => s.scalingBuffer === undefined || s.maxReplicas === undefined || s.scalingBuffer < s.maxReplicas,
    {
      message: 'scalingBuffer must be less than maxReplicas',
      path: ['scalingBuffer'],
    },
  );

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

/**
 * Replicas the App's Deployment runs: the autoscaler's last decision (`status.desiredReplicas`),
 * clamped to the spec. Before the autoscaler has decided, at least one replica starts even with
 * minReplicas 0, so a new App proves its image and code work; it scales to zero when idle.
 */
export function deploymentReplicas(app: App): number {
  const s = effectiveScaling(app.spec.scaling);
  const wanted = app.status?.desiredReplicas ?? Math.max(s.minReplicas, 1);
  return Math.min(Math.max(wanted, s.minReplicas), s.maxReplicas);
}

/** Why the App cannot start, when its Ready condition says so (see APP_START_FAILURE_REASONS). */
export function startFailureOf(app: App): { reason: string; message: string } | undefined {
  const ready = app.status?.conditions?.find((c) => c.type === 'Ready');
  if (ready?.status !== 'False' || !ready.reason || !APP_START_FAILURE_REASONS.has(ready.reason))
    return undefined;
  return { reason: ready.reason, message: ready.message || ready.reason };
}
