/**
 * A keyed work queue in the client-go mould: a key is queued at most once, a key being processed
 * is never processed concurrently (a re-add while busy runs it again afterwards), and failures
 * come back after a per-key exponential backoff, so one broken object never blocks the others.
 */
import { type BackoffSettings, backoffDelay } from '../../shared/backoff.ts';
import type { Clock } from '../../shared/clock.ts';

export interface WorkQueue {
  add(key: string): void;
  /** Adds after `ms` (a delayed add of a key already queued is a no-op when it fires). */
  addAfter(key: string, ms: number): void;
  /** Adds after the key's next backoff delay and counts one more failure. */
  addRateLimited(key: string): void;
  /** Clears the key's failure count (after a successful reconcile). */
  forget(key: string): void;
  failures(key: string): number;
  /** Waits for the next key; undefined once the queue is shut down. */
  get(): Promise<string | undefined>;
  done(key: string): void;
  length(): number;
  shutDown(): void;
}

export function createWorkQueue(opts: { backoff: BackoffSettings; clock?: Clock }): WorkQueue {
  const queue: string[] = [];
  const dirty = new Set<string>();
  const processing = new Set<string>();
  const failureCounts = new Map<string, number>();
  const timers = new Set<NodeJS.Timeout>();
  const waiters: Array<(key: string | undefined) => void> = [];
  let closed = false;

  const add = (key: string) => {
    if (closed || dirty.has(key)) return;
    dirty.add(key);
    if (processing.has(key)) return;
    const waiter = waiters.shift();
    if (waiter) {
      dirty.delete(key);
      processing.add(key);
      waiter(key);
    } else {
      queue.push(key);
    }
  };

  const addAfter = (key: string, ms: number) => {
    if (closed) return;
    if (ms <= 0) return add(key);
    const t = setTimeout(() => {
      timers.delete(t);
      add(key);
    }, ms);
    t.unref();
    timers.add(t);
  };

  return {
    add,
    addAfter,
    addRateLimited(key) {
      const n = (failureCounts.get(key) ?? 0) + 1;
      failureCounts.set(key, n);
      addAfter(key, backoffDelay(n, opts.backoff));
    },
    forget(key) {
      failureCounts.delete(key);
    },
    failures: (key) => failureCounts.get(key) ?? 0,
    get() {
      if (closed) return Promise.resolve(undefined);
      const key = queue.shift();
      if (key !== undefined) {
        dirty.delete(key);
        processing.add(key);
        return Promise.resolve(key);
      }
      return new Promise((resolve) => waiters.push(resolve));
    },
    done(key) {
      processing.delete(key);
      if (dirty.has(key)) {
        dirty.delete(key);
        add(key);
      }
    },
    length: () => queue.length,
    shutDown() {
      closed = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const w of waiters.splice(0)) w(undefined);
    },
  };
}
