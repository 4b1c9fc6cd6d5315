/**
 * Gives back what a process's start-up left in V8's heap, once the process serves: one memory-reducing
 * collection (Node's `gc()` with `flavor: 'last-resort'`, V8's low-memory notification: every full
 * collection that still frees something, the young generation shrunk to its minimum and the pages it
 * emptied returned to the system). Start-up grows the young generation to its maximum (2 × the chart's
 * `--max-semi-space-size=8`), and an idle process then touches its pages one by one. V8's memory reducer
 * would give them back, but in Node 24 it does not start at idle: it waits while "allocation is high",
 * and an embedder that allocates nothing through cppgc counts as high. Only its 100 s watchdog
 * collects, so an idle gateway climbed ~6 MiB before it (docs/benchmarks.md, issue 16's fourteenth round).
 *
 * `gc` is Node's global, present with `--expose-gc` (the chart's `gateway.nodeOptions`); without it
 * nothing is done. Called once, as the process starts serving (before a pod is ready: its readiness
 * probe comes later); a call arriving during its pause (~10–25 ms) waits, as for any full collection.
 */
export function releaseStartupHeap(gc: NodeJS.GCFunction | undefined): boolean {
  if (!gc) return false;
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return true;
}
