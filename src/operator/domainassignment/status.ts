/** DomainAssignment status: Ready says whether the hostname is routed as the spec asks, and why not. */
import type { Condition, DomainAssignment, DomainAssignmentStatus } from '../../apis/v1alpha1/types.ts';
import { setCondition } from '../runtime/conditions.ts';

export const DomainReason = {
  Routed: 'Routed',
  Unassigned: 'Unassigned',
  AppNotFound: 'AppNotFound',
  GatewayNotFound: 'GatewayNotFound',
  HostnameConflict: 'HostnameConflict',
  ReconcileFailed: 'ReconcileFailed',
} as const;

type Ready = Omit<Condition, 'lastTransitionTime' | 'type'>;

export const markRouted = (da: DomainAssignment): Ready => ({
  status: 'True',
  reason: DomainReason.Routed,
  message: `${da.spec.hostname} routes to app "${da.spec.appName}"`,
});
export const markUnassigned = (da: DomainAssignment): Ready => ({
  status: 'True',
  reason: DomainReason.Unassigned,
  message: `${da.spec.hostname} is not assigned to an app; it has no route`,
});
export const markAppNotFound = (da: DomainAssignment): Ready => ({
  status: 'False',
  reason: DomainReason.AppNotFound,
  message: `app "${da.spec.appName}" does not exist in namespace ${da.metadata.namespace}; create it or assign the domain to another app`,
});
export const markGatewayNotFound = (namespace: string, name: string): Ready => ({
  status: 'False',
  reason: DomainReason.GatewayNotFound,
  message: `the gateway Service ${namespace}/${name} does not exist, so nothing can route to it (is the platform installed?)`,
});
export const markHostnameConflict = (da: DomainAssignment, other: string): Ready => ({
  status: 'False',
  reason: DomainReason.HostnameConflict,
  message: `hostname ${da.spec.hostname} is already claimed by DomainAssignment ${other}`,
});
export const markFailed = (message: string): Ready => ({
  status: 'False',
  reason: DomainReason.ReconcileFailed,
  message,
});

export function computeDomainStatus(da: DomainAssignment, ready: Ready, now: string): DomainAssignmentStatus {
  const generation = da.metadata.generation ?? 0;
  return {
    observedGeneration: generation,
    conditions: setCondition(
      da.status?.conditions,
      { type: 'Ready', ...ready, observedGeneration: generation },
      now,
    ),
  };
}
