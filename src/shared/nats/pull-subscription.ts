/**
 * Pull requests to a durable JetStream consumer answered on one subscription that lives as long as
 * the reader, for `startPullLoop` (pull-loop.ts). nats.js's `consumer.fetch()` makes per pull a new inbox
 * subscription (a SUB and an UNSUB, which also costs the server a subscription-cache change), an idle
 * heartbeat monitor, a connection-status iterator and a close listener: ~4% of the webhook
 * dispatcher's CPU, which pulls every few jobs. Here a pull is one PUB of a `CONSUMER.MSG.NEXT` request
 * with a reply subject under the subscription, plus one timer. nats.js's own persistent pull,
 * `consumer.consume()`, keeps a buffer of up to `max_messages` filled ahead of the reader, so jobs would
 * wait in the client with their ack-wait running and no slot free; here a pull asks for exactly the free
 * slots, as `fetch()` does.
 *
 * One pull is open at a time, as with `fetch()`: it ends when its batch has come, when the server says
 * it expired (408) or had nothing (404), when the connection drops or comes back (the server forgets a
 * disconnected client's requests; one sent while reconnecting may or may not have reached it), when the
 * reader stops it, or at the latest `PULL_ANSWER_GRACE_MS` after its own expiry. The server's refusals
 * (409: consumer deleted, too many waiting requests...; 503: JetStream unavailable; 400) end the pull with
 * an error, which the loop backs off from.
 *
 * A pull that ends without the server's word takes the subscription with it (the next pull makes a new
 * one): JetStream drops a waiting request nobody listens to, and what it had already sent is dropped
 * here, so it waits out its ack wait. Such a message is never handed back (nak) on arrival: it may be a
 * delivery that sat in this process's socket past its ack wait (a stalled or stopped process; the pull's
 * bound fires before the socket is read) and that JetStream has already handed to another reader, and
 * the server takes a nak by stream sequence, without asking which delivery it answers — it would hand
 * the message out once more while the other reader still holds it (a run executed twice). Nothing is
 * ever held without a slot: a message that finds no open pull with room is left alone.
 */
import { JetStreamStatus } from '@nats-io/jetstream/internal';
import { createInbox, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';

/** How long after its own expiry a pull that got no answer from the server is given up. */
export const PULL_ANSWER_GRACE_MS = 2_000;

/** One message of a pull, acknowledged as nats.js's `JsMsg` is (the members the readers use). */
export interface PulledMsg {
  readonly data: Uint8Array;
  readonly subject: string;
  /** Stream sequence. */
  readonly seq: number;
  readonly info: {
    readonly deliveryCount: number;
    readonly streamSequence: number;
    /** When JetStream stored the message. */
    readonly timestampNanos: number;
  };
  ack(): void;
  nak(millis?: number): void;
  term(reason?: string): void;
  working(): void;
}

/** The messages of one pull, as they arrive; `stop()` ends it early. */
export interface PullBatch<M> extends AsyncIterable<M> {
  stop(err?: Error): void;
}

/** What `startPullLoop` pulls from: a nats.js `Consumer` has it too. */
export interface PullSource<M> {
  fetch(opts: { max_messages: number; expires: number }): Promise<PullBatch<M>>;
}

export interface PullSubscription extends PullSource<PulledMsg> {
  /** Ends the open pull and unsubscribes; the server drops requests nobody listens to. */
  close(): void;
}

const encoder = new TextEncoder();
const ACK = encoder.encode('+ACK');
const NAK = encoder.encode('-NAK');
const WPI = encoder.encode('+WPI');
const TERM = encoder.encode('+TERM');

export function createPullSubscription(
  nc: NatsConnection,
  stream: string,
  consumer: string,
): PullSubscription {
  const api = `$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`;
  let open: Batch | undefined;
  let next = 0;
  let closed = false;
  // Made for the first pull and after each pull given up locally (see above).
  let current: { prefix: string; sub: Subscription } | undefined;

  const listen = () => {
    const prefix = `${createInbox()}.`;
    const sub = nc.subscribe(`${prefix}*`, {
      callback: (err, msg) => {
        if (current?.sub !== sub) return;
        if (err) {
          open?.end(err);
          return;
        }
        if (msg.subject.startsWith(prefix)) {
          // A status for one of our requests; one for an earlier request is stale.
          if (open && msg.subject === prefix + open.token) onStatus(open, msg);
          return;
        }
        // Otherwise left alone: without a slot for it, it waits out its ack wait (see above).
        open?.offer(msg);
      },
    });
    return { prefix, sub };
  };

  const forget = () => {
    const c = current;
    current = undefined;
    if (c && !nc.isClosed()) c.sub.unsubscribe();
  };

  const onStatus = (batch: Batch, msg: Msg) => {
    const status = new JetStreamStatus(msg);
    const code = status.code;
    if (code === 100) return; // an idle heartbeat (not asked for)
    if (code === 404 || code === 408) batch.end(undefined, true);
    else batch.end(status.toError(), true);
  };

  // A dropped connection takes the server's record of our open request with it, and a pull sent while
  // reconnecting may reach a server whose JetStream is not serving yet: either way, pull again.
  const status = nc.status();
  void (async () => {
    for await (const s of status) if (s.type === 'disconnect' || s.type === 'reconnect') open?.end();
  })().catch(() => {});

  return {
    async fetch({ max_messages, expires }) {
      if (closed) throw new Error('the pull subscription is closed');
      open?.end();
      current ??= listen();
      const token = (next++).toString(36);
      const batch = new Batch(token, max_messages, expires + PULL_ANSWER_GRACE_MS, (b, answered) => {
        if (open === b) open = undefined;
        if (!answered) forget();
      });
      open = batch;
      try {
        nc.publish(api, JSON.stringify({ batch: max_messages, expires: expires * 1_000_000 }), {
          reply: current.prefix + token,
        });
      } catch (err) {
        batch.end(err as Error);
        throw err;
      }
      return batch;
    },
    close() {
      if (closed) return;
      closed = true;
      open?.end();
      (status as { stop?: () => void }).stop?.();
      forget();
    },
  };
}

class Batch implements PullBatch<PulledMsg> {
  readonly token: string;
  readonly #want: number;
  readonly #onEnd: (b: Batch, answered: boolean) => void;
  readonly #timer: NodeJS.Timeout;
  /** When the pull is given up locally (performance.now()), also if its timer has not run yet. */
  readonly #deadline: number;
  #got = 0;
  #queue: PulledMsg[] = [];
  #waiter: ((r: IteratorResult<PulledMsg>) => void) | undefined;
  #failWaiter: ((err: Error) => void) | undefined;
  #ended = false;
  #error: Error | undefined;

  constructor(token: string, want: number, boundMs: number, onEnd: (b: Batch, answered: boolean) => void) {
    this.token = token;
    this.#want = want;
    this.#onEnd = onEnd;
    this.#deadline = performance.now() + boundMs;
    this.#timer = setTimeout(() => this.end(), boundMs);
  }

  /** Takes `msg` if this pull still has room for it. */
  offer(msg: Msg): boolean {
    if (this.#ended || this.#got >= this.#want) return false;
    // Past the bound the pull is given up, whichever the event loop runs first: its timer or the read
    // of a message that reached the socket meanwhile (a process stopped and continued reads its socket
    // first when epoll has events). Such a message's ack wait may have passed: another reader may hold it.
    if (performance.now() >= this.#deadline) {
      this.end();
      return false;
    }
    this.#got++;
    const m = new JobMsg(msg);
    const w = this.#waiter;
    if (w) {
      this.#waiter = undefined;
      this.#failWaiter = undefined;
      w({ value: m, done: false });
    } else this.#queue.push(m);
    if (this.#got >= this.#want) this.end(undefined, true);
    return true;
  }

  /**
   * No more messages (those already taken are still handed out); with `err`, the iteration then fails.
   * `answered`: the server ended the request too (its batch came, it expired, it was refused).
   */
  end(err?: Error, answered = false): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#error = err;
    clearTimeout(this.#timer);
    this.#onEnd(this, answered);
    if (this.#waiter) {
      const w = this.#waiter;
      const f = this.#failWaiter;
      this.#waiter = undefined;
      this.#failWaiter = undefined;
      if (err) f?.(err);
      else w({ value: undefined, done: true });
    }
  }

  stop(err?: Error): void {
    this.end(err);
  }

  [Symbol.asyncIterator](): AsyncIterator<PulledMsg> {
    return {
      next: () => {
        const m = this.#queue.shift();
        if (m) return Promise.resolve({ value: m, done: false });
        if (this.#ended)
          return this.#error
            ? Promise.reject(this.#error)
            : Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => {
          this.#waiter = resolve;
          this.#failWaiter = reject;
        });
      },
    };
  }
}

/** nats.js's `JsMsgImpl` acknowledgements: one final answer (ack, nak, term), any number of `working()`. */
class JobMsg implements PulledMsg {
  readonly #msg: Msg;
  #info: PulledMsg['info'] | undefined;
  #answered = false;

  constructor(msg: Msg) {
    this.#msg = msg;
  }

  get data(): Uint8Array {
    return this.#msg.data;
  }

  get subject(): string {
    return this.#msg.subject;
  }

  get seq(): number {
    return this.info.streamSequence;
  }

  get info(): PulledMsg['info'] {
    this.#info ??= parseAckSubject(this.#msg.reply ?? '');
    return this.#info;
  }

  ack(): void {
    this.#answer(ACK);
  }

  nak(millis?: number): void {
    this.#answer(millis ? encoder.encode(`-NAK ${JSON.stringify({ delay: millis * 1_000_000 })}`) : NAK);
  }

  term(reason?: string): void {
    this.#answer(reason ? encoder.encode(`+TERM ${reason}`) : TERM);
  }

  working(): void {
    if (!this.#answered) this.#msg.respond(WPI);
  }

  #answer(payload: Uint8Array): void {
    if (this.#answered) return;
    this.#answered = true;
    this.#msg.respond(payload);
  }
}

/**
 * The delivery facts in a JetStream message's reply subject, as nats.js parses them:
 * `$JS.ACK.<stream>.<consumer>.<deliveries>.<stream seq>.<consumer seq>.<nanos>.<pending>`, or the form
 * with `<domain>.<account hash>` after `ACK` and a random token at the end.
 */
export function parseAckSubject(reply: string): PulledMsg['info'] {
  const t = reply.split('.');
  const at = t.length === 9 ? 2 : 4;
  if (t[0] !== '$JS' || t[1] !== 'ACK' || (t.length !== 9 && t.length < 11))
    throw new Error('unable to parse delivery info - not a jetstream message');
  return {
    deliveryCount: Number.parseInt(t[at + 2] as string, 10),
    streamSequence: Number.parseInt(t[at + 3] as string, 10),
    timestampNanos: Number.parseInt(t[at + 5] as string, 10),
  };
}
