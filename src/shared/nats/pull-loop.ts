/**
 * One JetStream pull loop for every durable-consumer reader (the run worker, the webhook dispatcher, the
 * build worker): up to `concurrency` messages are handled at once. One fetch asks for as many messages
 * as there are free slots (a batch), so under load a pull request, its inbox subscription and its
 * round trip serve several messages instead of one. A message is only ever asked for when a slot is free
 * for it: nothing waits in a local buffer while its ack wait runs. A failed pull backs off; a message
 * pulled while stopping is handed back at once (nak) for another replica.
 */
import type { JsMsg } from '@nats-io/jetstream';
import type { Clock } from '../clock.ts';
import type { Logger } from '../log.ts';
import type { PullSource } from './pull-subscription.ts';
import type { SendTurn } from './send-turn.ts';

export interface PullLoopOptions<M extends { nak(): void } = JsMsg> {
  /** A nats.js `Consumer`, or a persistent pull subscription (pull-subscription.ts). */
  consumer: PullSource<M>;
  /** Messages handled at once (and the largest batch one pull asks for). */
  concurrency: number;
  /** How long one pull waits on the server before asking again. */
  expiresMs: number;
  /** Pause after a failed pull (e.g. NATS unreachable) before pulling again. */
  errorBackoffMs: number;
  clock: Clock;
  log: Logger;
  handle(msg: M): Promise<void>;
  /** `handle` threw: decide the message's fate (nak, leave for redelivery...). Holds the slot until done. */
  onError(err: unknown, msg: M): Promise<void> | void;
  /**
   * The reader's send turn (send-turn.ts): each pull request then leaves in the same socket write as the
   * record writes and acks its handlers started in that turn. Without it, a pull waits one turn of its own.
   */
  turn?: SendTurn;
}

export interface PullLoop {
  /** Messages being handled now. */
  inFlight(): number;
  /** Stops pulling (pending pulls end at once); messages being handled go on. */
  stop(): void;
  /** Resolves once the loop has returned and the last handler is done, i.e. after stop(). */
  readonly done: Promise<void>;
}

export function startPullLoop<M extends { nak(): void } = JsMsg>(o: PullLoopOptions<M>): PullLoop {
  let running = true;
  let inFlight = 0;
  let batch: { stop(err?: Error): void } | undefined;
  // Resolved when a slot frees (or on stop) while the loop waits for one.
  let slotFreed: (() => void) | undefined;
  let allDone: (() => void) | undefined;

  const release = () => {
    inFlight--;
    slotFreed?.();
    if (inFlight === 0) allDone?.();
  };

  async function run(msg: M): Promise<void> {
    try {
      await o.handle(msg);
    } catch (err) {
      try {
        await o.onError(err, msg);
      } catch (e) {
        o.log.warn({ err: e }, 'deciding the fate of a failed message failed; it will be redelivered');
      }
    } finally {
      release();
    }
  }

  async function loop(): Promise<void> {
    while (running) {
      if (inFlight >= o.concurrency) {
        await new Promise<void>((r) => {
          slotFreed = r;
        });
        slotFreed = undefined;
        continue;
      }
      // One turn of the event loop, so handlers finishing together free their slots into one batch.
      const fetch = () =>
        o.consumer.fetch({ max_messages: Math.max(o.concurrency - inFlight, 1), expires: o.expiresMs });
      const turn = o.turn;
      if (!turn) await new Promise<void>((r) => setImmediate(r));
      if (!running) break;
      try {
        const pull = await (turn ? turn(() => (running ? fetch() : Promise.resolve(undefined))) : fetch());
        if (!pull) break;
        batch = pull;
        try {
          for await (const msg of pull) {
            if (!running) {
              msg.nak();
              continue;
            }
            // Asked for no more than the free slots, so this one has a slot now.
            inFlight++;
            void run(msg);
          }
        } finally {
          batch = undefined;
        }
      } catch (err) {
        if (!running) break;
        o.log.warn({ err }, 'pulling from JetStream failed; backing off');
        await o.clock.sleep(o.errorBackoffMs).catch(() => undefined);
      }
    }
  }

  const done = loop().then(async () => {
    if (inFlight > 0)
      await new Promise<void>((r) => {
        allDone = r;
      });
  });
  return {
    inFlight: () => inFlight,
    stop() {
      running = false;
      batch?.stop();
      slotFreed?.();
    },
    done,
  };
}
