/** The most intervals open at once: how many calls ran together, from each call's start and end. */
export function maxOverlap(runs: ReadonlyArray<{ start: number; end: number }>): number {
  const edges = runs.flatMap((r) => [
    { t: r.start, d: 1 },
    { t: r.end, d: -1 },
  ]);
  // At equal times an end comes first: a call starting as another ends does not overlap it.
  edges.sort((a, b) => a.t - b.t || a.d - b.d);
  let cur = 0;
  let max = 0;
  for (const e of edges) {
    cur += e.d;
    max = Math.max(max, cur);
  }
  return max;
}
