/**
 * The reasons an App's `Ready` condition can carry: the operator writes them, the gateway and the
 * CLI read them. docs/operator.md says what each means and what a platform team does about it.
 */
export const AppReadyReason = {
  Ready: 'Ready',
  /** Scaled to zero by the autoscaler: the next call starts a replica. */
  ScaledToZero: 'ScaledToZero',
  DeploymentPending: 'DeploymentPending',
  RolloutInProgress: 'RolloutInProgress',
  ProgressDeadlineExceeded: 'ProgressDeadlineExceeded',
  /** Pods refused at creation: admission (Pod Security, quota, a webhook). */
  ReplicaFailure: 'ReplicaFailure',
  /** A container image cannot be pulled (not found, no access, bad name). */
  ImagePullFailed: 'ImagePullFailed',
  /** A container keeps exiting; the message carries its exit code and termination message. */
  CrashLoopBackOff: 'CrashLoopBackOff',
  /** The kubelet cannot create the container (missing Secret key, root image under runAsNonRoot...). */
  ContainerConfigError: 'ContainerConfigError',
  /** No node can take the pod (resources, taints, selectors). */
  Unschedulable: 'Unschedulable',
  NameConflict: 'NameConflict',
  ReconcileFailed: 'ReconcileFailed',
} as const;
export type AppReadyReason = (typeof AppReadyReason)[keyof typeof AppReadyReason];

/**
 * Ready=False reasons that mean the App cannot start a replica until someone changes something: a
 * call held for a cold start fails at once with the condition's message instead of waiting out its
 * bound. Unschedulable is not one: a cluster autoscaler may still add a node.
 */
export const APP_START_FAILURE_REASONS: ReadonlySet<string> = new Set<AppReadyReason>([
  AppReadyReason.ImagePullFailed,
  AppReadyReason.CrashLoopBackOff,
  AppReadyReason.ContainerConfigError,
  AppReadyReason.ReplicaFailure,
  AppReadyReason.ProgressDeadlineExceeded,
]);
