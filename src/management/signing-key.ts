/**
 * Which run-token key signs. A rotated key reaches the gateway through a mounted Secret, which the
 * kubelet refreshes only every minute or so: signing with it at once would hand out tokens the
 * gateway rejects until then. So a new key signs only once it is `activationMs` old; until then the
 * newest older key does (verifiers accept every key of the set either way).
 */
import type { KeySet } from '../shared/run-tokens.ts';

/** The set with its signing key first: the newest key at least `activationMs` old, else the newest. */
export function activeKeySet(set: KeySet, nowMs: number, activationMs: number): KeySet {
  const i = set.keys.findIndex((k) => nowMs - Date.parse(k.createdAt) >= activationMs);
  if (i <= 0) return set;
  const active = set.keys[i];
  if (!active) return set;
  return { keys: [active, ...set.keys.filter((_, j) => j !== i)] };
}
