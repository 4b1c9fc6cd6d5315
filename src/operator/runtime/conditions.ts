/**
 * Condition helpers: set a condition, keeping lastTransitionTime when the status did not flip, so a
 * reconcile that changes nothing produces an identical status (and therefore no write).
 */
import type { Condition } from '../../apis/v1alpha1/types.ts';

export function setCondition(
  conditions: readonly Condition[] | undefined,
  next: Omit<Condition, 'lastTransitionTime'>,
  now: string,
): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === next.type);
  const prev = i >= 0 ? list[i] : undefined;
  const lastTransitionTime =
    prev && prev.status === next.status && prev.lastTransitionTime ? prev.lastTransitionTime : now;
  const cond: Condition = { ...next, lastTransitionTime };
  for (const k of Object.keys(cond) as Array<keyof Condition>) if (cond[k] === undefined) delete cond[k];
  if (i >= 0) list[i] = cond;
  else list.push(cond);
  return list;
}

export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** Kubernetes timestamps have second precision. */
export const kubeTime = (ms: number): string =>
  new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
