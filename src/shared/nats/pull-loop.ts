/**
 * One JetStream pull loop for every durable-consumer reader (the run worker, the webhook dispatcher):
 * `concurrency` loops each pull one message, hand it to `handle`, and pull again. A failed pull backs
 * off; a message pulled while stopping is handed back at once (nak) for another replica.
 */
import type { Consumer, JsMsg } from '@nats-io/jetstream';
import type { Clock } from '../clock.ts';
import type { Logger } from '../log.ts';

export interface PullLoopOptions {
  consumer: Consumer;
  /** Messages handled at once. */
  concurrency: number;
  /** How long one pull waits on the server before asking again. */
  expiresMs: number;
  /** Pause after a failed pull (e.g. NATS unreachable) before pulling again. */
  errorBackoffMs: number;
  clock: Clock;
  log: Logger;
  handle(msg: JsMsg): Promise<void>;
  /** `handle` threw: decide the message's fate (nak, leave for redelivery...). Holds the slot until done. */
  onError(err: unknown, msg: JsMsg): Promise<void> | void;
}

export interface PullLoop {
  /** Messages being handled now. */
  inFlight(): number;
  /** Stops pulling (pending pulls end at once); messages being handled go on. */
  stop(): void;
  /** Resolves once every loop has returned, i.e. after stop() and the last handler. */
  readonly done: Promise<void>;
}

export function startPullLoop(o: PullLoopOptions): PullLoop {
  let running = true;
  let inFlight = 0;
  const batches = new Set<{ stop(err?: Error): void }>();

  async function loop(): Promise<void> {
    while (running) {
      try {
        const batch = await o.consumer.fetch({ max_messages: 1, expires: o.expiresMs });
        batches.add(batch);
        try {
          for await (const msg of batch) {
            if (!running) {
              msg.nak();
              continue;
            }
            inFlight++;
            try {
              await o.handle(msg);
            } catch (err) {
              await o.onError(err, msg);
            } finally {
              inFlight--;
            }
          }
        } finally {
          batches.delete(batch);
        }
      } catch (err) {
        if (!running) break;
        o.log.warn({ err }, 'pulling from JetStream failed; backing off');
        await o.clock.sleep(o.errorBackoffMs).catch(() => undefined);
      }
    }
  }

  const done = Promise.all(Array.from({ length: o.concurrency }, () => loop())).then(() => undefined);
  return {
    inFlight: () => inFlight,
    stop() {
      running = false;
      for (const b of batches) b.stop();
    },
    done,
  };
}
