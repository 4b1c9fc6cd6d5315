/**
 * client-node informers stop for good on a watch or list error (an API server restart, a 403 while RBAC
 * is being applied): this restarts one with a doubling delay, back to the first delay once it connects.
 */
import type { Informer, KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../log.ts';

/** First and largest delay before restarting a failed watch. */
export const WATCH_RESTART_MIN_MS = 1_000;
export const WATCH_RESTART_MAX_MS = 30_000;

export function restartOnError<T extends KubernetesObject>(
  inf: Informer<T>,
  opts: { name: string; log: Logger; stopped: () => boolean },
): void {
  let delay = WATCH_RESTART_MIN_MS;
  inf.on('connect', () => {
    delay = WATCH_RESTART_MIN_MS;
  });
  inf.on('error', (err) => {
    if (opts.stopped()) return;
    opts.log.warn({ err, watch: opts.name, retryInMs: delay }, 'watch failed; restarting');
    const wait = delay;
    delay = Math.min(delay * 2, WATCH_RESTART_MAX_MS);
    setTimeout(() => {
      if (!opts.stopped())
        inf.start().catch((e) => opts.log.error({ err: e, watch: opts.name }, 'watch restart failed'));
    }, wait).unref();
  });
}
