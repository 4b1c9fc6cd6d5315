/**
 * App status as named transitions: Ready summarises whether the App's Deployment has rolled out with
 * every replica ready, and says why not (what its pods show, stuck rollout, replica failures, name
 * conflict, apply error).
 */

import type { V1DeploymentStatus } from '@kubernetes/client-node';
import { AppReadyReason } from '../../apis/v1alpha1/app-reasons.ts';
import type { App, AppStatus, Condition } from '../../apis/v1alpha1/types.ts';
import type { Deployment, Pod } from '../../shared/kube/objects.ts';
import { findCondition, setCondition } from '../runtime/conditions.ts';
import { sameStatus } from '../runtime/status-writer.ts';
import { podFailureCause } from './pod-causes.ts';

export const ConditionType = { Ready: 'Ready' } as const;

export const AppReason = {
  Ready: AppReadyReason.Ready,
  Pending: AppReadyReason.DeploymentPending,
  RollingOut: AppReadyReason.RolloutInProgress,
  RolloutStuck: AppReadyReason.ProgressDeadlineExceeded,
  ReplicaFailure: AppReadyReason.ReplicaFailure,
  NameConflict: AppReadyReason.NameConflict,
  ReconcileFailed: AppReadyReason.ReconcileFailed,
  ScaledToZero: AppReadyReason.ScaledToZero,
} as const;

/** Why the Deployment is or is not ready, as a Ready condition (without its transition time). */
export function deploymentReadiness(dep: Deployment | undefined): Omit<Condition, 'lastTransitionTime'> {
  if (!dep)
    return {
      type: 'Ready',
      status: 'Unknown',
      reason: AppReason.Pending,
      message: 'waiting for the Deployment',
    };
  const want = dep.spec?.replicas ?? 1;
  const st: V1DeploymentStatus = dep.status ?? {};
  const stuck = st.conditions?.find(
    (c) => c.type === 'Progressing' && c.status === 'False' && c.reason === 'ProgressDeadlineExceeded',
  );
  if (stuck) {
    return {
      type: 'Ready',
      status: 'False',
      reason: AppReason.RolloutStuck,
      message: `rollout is stuck: ${stuck.message ?? ''}`.trim(),
    };
  }
  const failure = st.conditions?.find((c) => c.type === 'ReplicaFailure' && c.status === 'True');
  if (failure) {
    return {
      type: 'Ready',
      status: 'False',
      reason: AppReason.ReplicaFailure,
      message: `pods cannot be created: ${failure.message ?? failure.reason ?? 'unknown reason'}`,
    };
  }
  const gen = dep.metadata.generation ?? 0;
  const ready = st.readyReplicas ?? 0;
  if ((st.observedGeneration ?? 0) < gen) {
    return {
      type: 'Ready',
      status: 'Unknown',
      reason: AppReason.RollingOut,
      message: 'the Deployment controller has not seen the latest spec yet',
    };
  }
  const updated = st.updatedReplicas ?? 0;
  const available = st.availableReplicas ?? 0;
  const total = st.replicas ?? 0;
  if (updated < want || ready < want || available < want || total > updated) {
    return {
      type: 'Ready',
      status: 'False',
      reason: AppReason.RollingOut,
      message: `${Math.min(ready, want)} of ${want} replicas ready (${updated} updated, ${total} total)`,
    };
  }
  // Scaled to zero is a serving state: the gateway holds the next call and the autoscaler starts a
  // replica for it (a cold start).
  if (want === 0) {
    return {
      type: 'Ready',
      status: 'True',
      reason: AppReason.ScaledToZero,
      message: 'no replica runs (no calls for the cooldown); the next call starts one',
    };
  }
  return {
    type: 'Ready',
    status: 'True',
    reason: AppReason.Ready,
    message: `${ready} of ${want} replicas ready`,
  };
}

/**
 * Ready from the Deployment, and when that is not True, the cause its pods show (an image pull
 * error, a crash, ...) in place of the Deployment's less specific reason.
 */
export function appReadiness(
  deployment: Deployment | undefined,
  pods: readonly Pod[],
  previous: Condition | undefined,
): Omit<Condition, 'lastTransitionTime'> {
  const ready = deploymentReadiness(deployment);
  if (ready.status === 'True') return ready;
  const cause = podFailureCause(pods, previous);
  return cause ? { type: ConditionType.Ready, status: 'False', ...cause } : ready;
}

export function computeAppStatus(
  app: App,
  opts: {
    deployment: Deployment | undefined;
    /** The App's pods (from the cache); none when unknown. */
    pods?: readonly Pod[];
    url: string;
    now: string;
    failure?: { reason: string; message: string };
  },
): AppStatus {
  const previous = findCondition(app.status?.conditions, ConditionType.Ready);
  const ready = opts.failure
    ? {
        type: ConditionType.Ready,
        status: 'False' as const,
        reason: opts.failure.reason,
        message: opts.failure.message,
      }
    : appReadiness(opts.deployment, opts.pods ?? [], previous);
  const st: V1DeploymentStatus = opts.deployment?.status ?? {};
  // A URL is a promise that calls are served: published once the App has been Ready, then kept
  // (a later rollout of a broken image still has the old replicas serving).
  const served = ready.status === 'True' || Boolean(app.status?.url);
  return {
    observedGeneration: app.metadata.generation ?? 0,
    conditions: setCondition(
      app.status?.conditions,
      { ...ready, observedGeneration: app.metadata.generation ?? 0 },
      opts.now,
    ),
    ...(served ? { url: opts.url } : {}),
    readyReplicas: st.readyReplicas ?? 0,
    replicas: st.replicas ?? 0,
  };
}

/** Status fields only the autoscaler writes; the App reconciler neither sets nor compares them. */
export const AUTOSCALER_STATUS_FIELDS = ['desiredReplicas', 'observedConcurrency'] as const;

/** sameStatus for the App reconciler's own fields (a merge patch without them leaves them alone). */
export function sameReconciledStatus(live: unknown, computed: unknown): boolean {
  const own = (s: unknown) => {
    const copy = { ...((s ?? {}) as Record<string, unknown>) };
    for (const f of AUTOSCALER_STATUS_FIELDS) delete copy[f];
    return copy;
  };
  return sameStatus(own(live), own(computed));
}
