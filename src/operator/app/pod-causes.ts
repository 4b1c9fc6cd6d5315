/**
 * Why an App's pods do not become ready, read from the pods' own status the way `kubectl describe
 * pod` shows it: an image that cannot be pulled, a container that keeps exiting (with its exit code
 * and termination message), a container the kubelet cannot create, a pod no node can take.
 *
 * The kubelet alternates between states while it retries (ErrImagePull ↔ ImagePullBackOff, a crash
 * ↔ CrashLoopBackOff ↔ a short run), so each cause maps to one stable reason and message: a failing
 * App gets one status write per cause, not one per retry.
 */
import type { V1ContainerStateTerminated, V1ContainerStatus } from '@kubernetes/client-node';
import { AppReadyReason } from '../../apis/v1alpha1/app-reasons.ts';
import type { Condition } from '../../apis/v1alpha1/types.ts';
import type { Pod } from '../../shared/kube/objects.ts';

export interface PodCause {
  reason: AppReadyReason;
  message: string;
}

/** Kubelet waiting reasons that mean the image cannot be had. */
const IMAGE_PULL_WAITING = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'ErrImageNeverPull',
  'RegistryUnavailable',
  'SignatureValidationFailed',
]);
/** The back-off state: its message only says "Back-off pulling image", the error was in ErrImagePull's. */
const IMAGE_PULL_BACKOFF = 'ImagePullBackOff';

/** Kubelet waiting reasons that mean the container cannot be created or started as specified. */
const CONFIG_WAITING = new Set([
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
  'PreCreateHookError',
  'PreStartHookError',
]);

/** Bound on the part of a termination message copied into the condition (its tail: the error is last). */
export const MAX_TERMINATION_MESSAGE_CHARS = 1024;

/** When several pods fail differently, the cause reported first (the one to fix first). */
const PRIORITY: readonly AppReadyReason[] = [
  AppReadyReason.ImagePullFailed,
  AppReadyReason.ContainerConfigError,
  AppReadyReason.CrashLoopBackOff,
  AppReadyReason.Unschedulable,
];

/** The reasons read from pods. */
export const POD_CAUSE_REASONS: ReadonlySet<string> = new Set(PRIORITY);

const tail = (text: string, max: number): string =>
  text.length <= max ? text : `…${text.slice(text.length - max + 1)}`;

function exited(container: string, t: V1ContainerStateTerminated): string {
  const kind = t.reason && t.reason !== 'Error' ? ` (${t.reason})` : '';
  const said = t.message?.trim();
  return said
    ? `container "${container}" exited with code ${t.exitCode}${kind}: ${tail(said, MAX_TERMINATION_MESSAGE_CHARS)}`
    : `container "${container}" exited with code ${t.exitCode}${kind}; its log says why (kubectl logs --previous)`;
}

const failedExit = (t: V1ContainerStateTerminated | undefined): t is V1ContainerStateTerminated =>
  Boolean(t && (t.exitCode !== 0 || t.reason === 'OOMKilled'));

function containerCause(
  c: V1ContainerStatus,
  specImage: string | undefined,
  previous: Condition | undefined,
): PodCause | undefined {
  const waiting = c.state?.waiting;
  if (waiting?.reason && IMAGE_PULL_WAITING.has(waiting.reason)) {
    const image = specImage ?? c.image;
    const prefix = `image "${image}" cannot be pulled`;
    // Keep the pull error seen earlier rather than replace it with the back-off notice.
    if (
      waiting.reason === IMAGE_PULL_BACKOFF &&
      previous?.reason === AppReadyReason.ImagePullFailed &&
      previous.message?.startsWith(`${prefix}:`)
    ) {
      return { reason: AppReadyReason.ImagePullFailed, message: previous.message };
    }
    return {
      reason: AppReadyReason.ImagePullFailed,
      message: `${prefix}: ${waiting.message?.trim() || waiting.reason}`,
    };
  }
  if (waiting?.reason && CONFIG_WAITING.has(waiting.reason)) {
    return {
      reason: AppReadyReason.ContainerConfigError,
      message: `container "${c.name}" cannot be created: ${waiting.message?.trim() || waiting.reason}`,
    };
  }
  if (c.ready) return undefined;
  // Exited now, or exited before and now backing off or starting again: a crash either way.
  const now = c.state?.terminated;
  const crashed = failedExit(now)
    ? now
    : failedExit(c.lastState?.terminated)
      ? c.lastState?.terminated
      : undefined;
  if (crashed) return { reason: AppReadyReason.CrashLoopBackOff, message: exited(c.name, crashed) };
  return undefined;
}

/** The causes one pod shows, at most one per container plus scheduling. */
function podCauses(pod: Pod, previous: Condition | undefined): PodCause[] {
  const causes: PodCause[] = [];
  const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable') {
    causes.push({
      reason: AppReadyReason.Unschedulable,
      message: `no node can run the App's pods: ${scheduled.message?.trim() || 'Unschedulable'}`,
    });
  }
  const images = new Map<string, string>();
  for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
    if (c.image) images.set(c.name, c.image);
  }
  for (const c of [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])]) {
    const cause = containerCause(c, images.get(c.name), previous);
    if (cause) causes.push(cause);
  }
  return causes;
}

/**
 * The cause to report for an App whose pods are not all ready, or undefined when its pods show none
 * (still starting, or no pods: see the Deployment's own conditions). Pods being deleted, and pods
 * that have finished (evicted), are not the App's current state and are ignored. `previous` is the
 * App's current Ready condition, used to keep a message stable across kubelet retries.
 */
export function podFailureCause(pods: readonly Pod[], previous?: Condition): PodCause | undefined {
  const live = pods
    .filter((p) => !p.metadata.deletionTimestamp)
    .filter((p) => p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed')
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
  const causes = live.flatMap((p) => podCauses(p, previous));
  for (const reason of PRIORITY) {
    const found = causes.find((c) => c.reason === reason);
    if (found) return found;
  }
  return undefined;
}
