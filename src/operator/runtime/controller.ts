/**
 * Runs a reconcile function over a keyed work queue with a fixed number of workers. Keys come from
 * informer handlers; while the controller is not running (not the leader) they are dropped, and a
 * new leader starts by enqueueing everything it has cached.
 */

import type { BackoffSettings } from '../../shared/backoff.ts';
import { isConflict } from '../../shared/kube/errors.ts';
import type { Logger } from '../../shared/log.ts';
import type { OperatorMetrics } from './metrics.ts';
import { createWorkQueue, type WorkQueue } from './workqueue.ts';

export interface ReconcileResult {
  /** Look again after this long even without an event (e.g. while waiting for a rollout). */
  requeueAfterMs?: number;
}

export type ReconcileFn = (key: string) => Promise<ReconcileResult | undefined>;

export interface Controller {
  readonly name: string;
  enqueue(key: string): void;
  start(): void;
  stop(): Promise<void>;
  running(): boolean;
  depth(): number;
}

export function createController(opts: {
  name: string;
  reconcile: ReconcileFn;
  workers: number;
  backoff: BackoffSettings;
  metrics: OperatorMetrics;
  log: Logger;
}): Controller {
  const { name, metrics } = opts;
  const log = opts.log.child({ controller: name });
  let queue: WorkQueue | undefined;
  let workers: Promise<void>[] = [];

  const updateDepth = () => metrics.queueDepth.set({ controller: name }, queue?.length() ?? 0);

  const work = async (q: WorkQueue) => {
    for (;;) {
      const key = await q.get();
      if (key === undefined) return;
      updateDepth();
      const end = metrics.reconcileDuration.startTimer({ controller: name });
      try {
        const result = await opts.reconcile(key);
        q.forget(key);
        if (result?.requeueAfterMs !== undefined) {
          q.addAfter(key, result.requeueAfterMs);
          metrics.reconciles.inc({ controller: name, result: 'requeue' });
        } else {
          metrics.reconciles.inc({ controller: name, result: 'success' });
        }
      } catch (err) {
        metrics.reconciles.inc({ controller: name, result: 'error' });
        // A write conflict only means our cache was a step behind; the retry sees the fresh object.
        const level = isConflict(err) ? 'debug' : 'warn';
        log[level]({ key, err: String(err), failures: q.failures(key) + 1 }, 'reconcile failed: backing off');
        q.addRateLimited(key);
      } finally {
        end();
        q.done(key);
        updateDepth();
      }
    }
  };

  return {
    name,
    enqueue(key) {
      if (!queue) return;
      queue.add(key);
      updateDepth();
    },
    start() {
      if (queue) return;
      const q = createWorkQueue({ backoff: opts.backoff });
      queue = q;
      workers = Array.from({ length: opts.workers }, () => work(q));
    },
    async stop() {
      const q = queue;
      queue = undefined;
      q?.shutDown();
      await Promise.all(workers);
      workers = [];
      updateDepth();
    },
    running: () => queue !== undefined,
    depth: () => queue?.length() ?? 0,
  };
}
