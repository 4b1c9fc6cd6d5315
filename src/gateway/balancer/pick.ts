/**
 * Which replica gets the next call: the one with the fewest calls in flight among those below
 * `capacity` and not blocked (a replica that just refused a call is left alone for a moment). Ties go
 * to the first such replica at or after `start`, so equal replicas take turns (round robin).
 */
export interface ReplicaLoad {
  inflight: number;
  /** Not picked before this time (ms). */
  blockedUntil: number;
}

/** Index of the replica to use, or -1 when every replica is full or blocked. */
export function pickReplica(
  replicas: readonly ReplicaLoad[],
  capacity: number,
  now: number,
  start = 0,
): number {
  const n = replicas.length;
  let best = -1;
  let bestLoad = Number.POSITIVE_INFINITY;
  for (let k = 0; k < n; k++) {
    const i = (start + k) % n;
    const r = replicas[i] as ReplicaLoad;
    if (r.inflight >= capacity || r.blockedUntil > now) continue;
    if (r.inflight < bestLoad) {
      best = i;
      bestLoad = r.inflight;
      if (bestLoad === 0) break;
    }
  }
  return best;
}

/**
 * When a call waiting for a slot can next be placed: the earliest block end of a replica with room —
 * possibly already past, since the clock moves on between a failed pick and this look (the caller
 * then tries again at once). Undefined when every replica is full (a freed slot dispatches instead).
 */
export function nextUnblock(replicas: readonly ReplicaLoad[], capacity: number): number | undefined {
  let at: number | undefined;
  for (const r of replicas) {
    if (r.inflight < capacity) at = at === undefined ? r.blockedUntil : Math.min(at, r.blockedUntil);
  }
  return at;
}
