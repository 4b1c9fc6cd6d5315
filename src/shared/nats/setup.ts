/**
 * Steps against JetStream retried within a bound. While a NATS node restarts or hangs, or a cluster
 * elects a leader, JetStream answers "no responders", "temporarily unavailable" or not at all for a few
 * seconds (longer on a loaded machine): a piece starting then should wait for it, not crash, and a write
 * that must not be lost (a run's record, its webhook job) should wait too, not give up at the first refusal.
 */
import { type BackoffSettings, backoffDelay } from '../backoff.ts';
import type { Logger } from '../log.ts';

const SETUP_BACKOFF: BackoffSettings = { baseDelayMs: 250, maxDelayMs: 5_000 };

export interface RetryOptions {
  boundMs: number;
  log: Logger;
  /** Pauses between attempts (shared/backoff.ts); 250 ms doubling to 5 s when absent. */
  backoff?: BackoffSettings;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
}

/** Runs `step` until it succeeds or `boundMs` is used up; then throws naming `what`, the last error as cause. */
export async function retryJetStream<T>(
  what: string,
  step: () => Promise<T>,
  opts: RetryOptions,
): Promise<T> {
  const now = opts.now ?? Date.now;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const backoff = opts.backoff ?? SETUP_BACKOFF;
  const deadline = now() + opts.boundMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (err) {
      const pause = backoffDelay(attempt, backoff);
      if (now() + pause > deadline)
        throw new Error(`${what}: JetStream did not answer within ${opts.boundMs} ms`, { cause: err });
      opts.log.warn({ err, attempt, retryInMs: pause }, `${what} failed; retrying`);
      await sleep(pause);
    }
  }
}

/** Start-up steps (creating streams, buckets, consumers): 250 ms doubling to 5 s between attempts. */
export function retryJetStreamSetup<T>(
  what: string,
  step: () => Promise<T>,
  opts: Omit<RetryOptions, 'backoff'>,
): Promise<T> {
  return retryJetStream(what, step, opts);
}
