/**
 * Start-up steps against JetStream (creating streams, buckets, consumers) retried within a bound. While a
 * NATS node restarts or a cluster elects a leader, JetStream answers "temporarily unavailable" or not at
 * all for a few seconds; a piece starting then should wait for it, not crash.
 */
import type { Logger } from '../log.ts';

const FIRST_PAUSE_MS = 250;
const MAX_PAUSE_MS = 5_000;

export async function retryJetStreamSetup<T>(
  what: string,
  step: () => Promise<T>,
  opts: { boundMs: number; log: Logger; sleep?: (ms: number) => Promise<void>; now?: () => number },
): Promise<T> {
  const now = opts.now ?? Date.now;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const deadline = now() + opts.boundMs;
  let pause = FIRST_PAUSE_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (err) {
      if (now() + pause > deadline)
        throw new Error(`${what}: JetStream did not answer within ${opts.boundMs} ms`, { cause: err });
      opts.log.warn({ err, attempt, retryInMs: pause }, `${what} failed; retrying`);
      await sleep(pause);
      pause = Math.min(pause * 2, MAX_PAUSE_MS);
    }
  }
}
