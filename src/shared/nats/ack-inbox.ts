/**
 * JetStream publishes whose acks come back on one reply subscription shared by all of them. nats.js's
 * `js.publish` goes through `nc.request`, which builds per request a mux entry, a timeout promise, a
 * `Promise.race`, a backoff and up to three `Error`s with captured stacks — one of them on every success
 * (`RequestOne.cancel` rejects its settled promise with a new `RequestError`): ~10% of the gateway's
 * 202 path, which makes two publishes per accept. Here a publish is a `PUB` with a reply subject under
 * this connection's own inbox; the ack is parsed and checked as nats.js does (JetStream's error →
 * `JetStreamApiError` with its code, "no responders" → an error), and each publish keeps its own bound.
 * Replies arriving after their bound are dropped.
 *
 * What is kept per publish lives only until its ack (docs/benchmarks.md "The ack inbox's per-publish
 * objects"): the waiting publishes sit in slots of a few long-lived arrays indexed by their sequential
 * token — no waiter object, no Map whose rehashed tables are promoted and keep settled waiters alive —
 * a slot is cleared when it settles, and one coarse timer checks the bounds instead of a Timeout per
 * publish.
 */
import { JetStreamApiError, JetStreamError, type PubAck } from '@nats-io/jetstream';
import {
  createInbox,
  type Msg,
  MsgHdrsImpl,
  type NatsConnection,
  NoRespondersError,
  type PublishOptions,
  TimeoutError,
} from '@nats-io/transport-node';

export interface AckedPublishOptions {
  /** `Nats-Msg-Id`: JetStream stores a message with the same id once within its duplicate window. */
  msgID?: string;
  /** Bound on the ack, in ms (an error when it passes, within `ACK_BOUND_CHECK_MS`). */
  timeout: number;
  /** `Nats-Expected-Last-Subject-Sequence` (0: no message on the subject yet — a KV create). */
  expect?: { lastSubjectSequence?: number };
}

/** What a JetStream publish needs; `JetStreamClient` has it too. */
export interface JetStreamPublisher {
  publish(subject: string, payload: string | Uint8Array, opts: AckedPublishOptions): Promise<PubAck>;
}

export interface AckInbox extends JetStreamPublisher {
  /**
   * A request answered on the same subscription, resolving with the reply as it came (no checks): e.g. a
   * JetStream direct get (src/shared/nats/inbox-kv.ts). "No responders" and the bound fail as a publish does.
   */
  request(subject: string, payload: string | Uint8Array, opts: { timeout: number }): Promise<Msg>;
  /** Publishes and requests still waiting for their answer. */
  pending(): number;
  /** Slots the waiting publishes have now: grown for a burst in flight, shrunk back after it. */
  slots(): number;
  /** Stops the reply subscription; waiting publishes fail. */
  close(): void;
}

/**
 * How often the waiting publishes are checked against their bounds, while any wait: a publish whose ack
 * does not come fails with a `TimeoutError` between its bound and this much after it.
 */
export const ACK_BOUND_CHECK_MS = 50;

/**
 * Slots of a new inbox (a power of two). When the next token's slot is still taken, that token is skipped
 * for the next free slot, or the slots double when half of them are taken.
 */
export const ACK_INBOX_FIRST_SLOTS = 64;

export interface AckInboxOptions {
  /** Slots to start with, a power of two (`ACK_INBOX_FIRST_SLOTS`). */
  slots?: number;
}

// biome-ignore lint/suspicious/noExplicitAny: a PubAck for a publish, the Msg for a request
type Resolve = (answer: any) => void;
type Reject = (err: unknown) => void;

const decoder = new TextDecoder();

/**
 * nats.js's publish reads only its headers' `encode()`, and MsgHdrsImpl's own builds a Map, an array per
 * value and a TextEncoder's ArrayBuffer per publish. This one gives the bytes set just before `publish`:
 * the same text as MsgHdrsImpl's (the value checked as its `set()` does), from Node's buffer pool.
 */
class PublishHeaders extends MsgHdrsImpl {
  bytes: Uint8Array = new Uint8Array(0);
  override encode(): Uint8Array {
    return this.bytes;
  }
}

function headerBytes(msgID: string | undefined, lastSubjectSequence: number | undefined): Uint8Array {
  let s = 'NATS/1.0';
  if (msgID !== undefined) s += `\r\nNats-Msg-Id: ${MsgHdrsImpl.validHeaderValue(msgID)}`;
  if (lastSubjectSequence !== undefined)
    s += `\r\nNats-Expected-Last-Subject-Sequence: ${lastSubjectSequence}`;
  return Buffer.from(`${s}\r\n\r\n`);
}

/** A KV create's headers: the same for every create, encoded once. */
const CREATE_HEADER_BYTES = headerBytes(undefined, 0);

// `new Promise(capture)` hands over its resolving functions without a closure made per publish.
let capturedResolve: Resolve | undefined;
let capturedReject: Reject | undefined;
const capture = (resolve: Resolve, reject: Reject) => {
  capturedResolve = resolve;
  capturedReject = reject;
};

/** Slot arrays for `size` waiting publishes; a free slot's token is -1. */
function slots(size: number) {
  return {
    size,
    tokens: new Float64Array(size).fill(-1),
    deadlines: new Float64Array(size),
    raw: new Uint8Array(size),
    resolves: new Array<Resolve | undefined>(size).fill(undefined),
    rejects: new Array<Reject | undefined>(size).fill(undefined),
    subjects: new Array<string | undefined>(size).fill(undefined),
  };
}

export function createAckInbox(nc: NatsConnection, opts: AckInboxOptions = {}): AckInbox {
  const first = opts.slots ?? ACK_INBOX_FIRST_SLOTS;
  if (!Number.isInteger(first) || first < 1 || (first & (first - 1)) !== 0) {
    throw new RangeError(`slots must be a power of two, got ${first}`);
  }
  const prefix = `${createInbox()}.`;
  let s = slots(first);
  let count = 0;
  let next = 0;
  let timer: NodeJS.Timeout | undefined;
  let armed = false;
  // One options object and one headers object for every publish: nats.js reads both within the call.
  const headers = new PublishHeaders();
  const pubOpts: PublishOptions = { reply: '', headers: undefined };

  /** Frees `slot`, returning its reject (its resolve, subject and kind are read before). */
  const free = (slot: number): Reject => {
    const reject = s.rejects[slot] as Reject;
    s.tokens[slot] = -1;
    s.resolves[slot] = undefined;
    s.rejects[slot] = undefined;
    s.subjects[slot] = undefined;
    count--;
    return reject;
  };

  /** Doubles the slots until `token`'s is free. Waiting tokens differ modulo the old size, so modulo any multiple. */
  const grow = (token: number) => {
    let size = s.size * 2;
    while (occupied(token, size)) size *= 2;
    resize(size);
  };
  /**
   * Halves grown slots once an eighth or fewer of them wait (they double at a half: no flapping), if the
   * waiting tokens still differ modulo half the size (no two in slots `i` and `i + half`). A burst in
   * flight (a NATS server's pause or failover) grows them, and every bound check reads all of them, so
   * they must not keep that size after it.
   */
  const shrink = () => {
    const half = s.size / 2;
    if (half < first || count * 4 > half) return;
    for (let i = 0; i < half; i++) if (s.tokens[i] !== -1 && s.tokens[i + half] !== -1) return;
    resize(half);
  };
  /** New slot arrays of `size`, each waiting publish in its token's slot. */
  const resize = (size: number) => {
    const old = s;
    s = slots(size);
    for (let i = 0; i < old.size; i++) {
      const t = old.tokens[i] as number;
      if (t === -1) continue;
      const j = t % size;
      s.tokens[j] = t;
      s.deadlines[j] = old.deadlines[i] as number;
      s.raw[j] = old.raw[i] as number;
      s.resolves[j] = old.resolves[i];
      s.rejects[j] = old.rejects[i];
      s.subjects[j] = old.subjects[i];
    }
  };
  const occupied = (token: number, size: number) => {
    for (let i = 0; i < s.size; i++) {
      const t = s.tokens[i] as number;
      if (t !== -1 && t % size === token % size) return true;
    }
    return false;
  };

  const check = () => {
    const now = performance.now();
    for (let slot = 0; slot < s.size; slot++) {
      if (s.tokens[slot] !== -1 && (s.deadlines[slot] as number) <= now) free(slot)(new TimeoutError());
    }
    if (count > 0) {
      shrink();
      timer?.refresh();
    } else {
      armed = false;
      if (s.size > first) s = slots(first);
    }
  };
  const arm = () => {
    if (armed) return;
    armed = true;
    // A fired timer is started again by refresh(): one Timeout for the inbox's life.
    if (timer) timer.refresh();
    else timer = setTimeout(check, ACK_BOUND_CHECK_MS);
  };

  const sub = nc.subscribe(`${prefix}*`, {
    callback: (err, msg: Msg) => {
      if (err) return; // a subscription error: the waiting publishes fail at their bound
      const token = Number.parseInt(msg.subject.slice(prefix.length), 36);
      const slot = token % s.size;
      if (s.tokens[slot] !== token) return; // its bound passed already (its slot may be another's now)
      const resolve = s.resolves[slot] as Resolve;
      const raw = s.raw[slot] === 1;
      const subject = s.subjects[slot] as string;
      const reject = free(slot);
      try {
        if (!raw) resolve(parseAck(msg, subject));
        else if (isNoResponders(msg)) throw new NoRespondersError(subject);
        else resolve(msg);
      } catch (e) {
        reject(e);
      }
    },
  });

  const send = <T>(
    subject: string,
    payload: string | Uint8Array,
    timeout: number,
    raw: boolean,
    h: Uint8Array | undefined,
  ): Promise<T> => {
    let token = next++;
    if (s.tokens[token % s.size] !== -1) {
      // A publish that waits long (its ack lost) would double the slots every time the tokens come round
      // to it: its token's slot is passed over instead, until half of the slots are taken.
      if (count * 2 >= s.size) grow(token);
      else while (s.tokens[token % s.size] !== -1) token = next++;
    }
    const slot = token % s.size;
    const promise = new Promise<T>(capture);
    s.tokens[slot] = token;
    s.deadlines[slot] = performance.now() + timeout;
    s.raw[slot] = raw ? 1 : 0;
    s.resolves[slot] = capturedResolve;
    s.rejects[slot] = capturedReject;
    s.subjects[slot] = subject;
    capturedResolve = capturedReject = undefined;
    count++;
    arm();
    pubOpts.reply = prefix + token.toString(36);
    if (h) {
      headers.bytes = h;
      pubOpts.headers = headers;
    }
    try {
      nc.publish(subject, payload, pubOpts);
    } catch (err) {
      if (s.tokens[slot] === token) free(slot)(err);
    } finally {
      // Nothing of this publish stays reachable from the long-lived objects.
      pubOpts.reply = '';
      pubOpts.headers = undefined;
      headers.bytes = CREATE_HEADER_BYTES;
    }
    return promise;
  };

  return {
    publish: (subject, payload, o) => {
      const seq = o.expect?.lastSubjectSequence;
      const h = o.msgID === undefined && seq === 0 ? CREATE_HEADER_BYTES : headerBytes(o.msgID, seq);
      return send<PubAck>(subject, payload, o.timeout, false, h);
    },
    request: (subject, payload, o) => send<Msg>(subject, payload, o.timeout, true, undefined),
    pending: () => count,
    slots: () => s.size,
    close() {
      if (!nc.isClosed()) sub.unsubscribe();
      clearTimeout(timer);
      timer = undefined;
      armed = false;
      for (let slot = 0; slot < s.size; slot++) {
        if (s.tokens[slot] !== -1) free(slot)(new Error('the ack inbox is closed'));
      }
    },
  };
}

/** nats.js's test for a "no responders" status reply. */
const isNoResponders = (msg: Msg) => msg.data.length === 0 && msg.headers?.code === 503;

/** nats.js's checks of a publish ack (jsclient `publish` + `parseJsResponse`). */
function parseAck(msg: Msg, subject: string): PubAck {
  if (isNoResponders(msg)) throw new NoRespondersError(subject);
  const v = JSON.parse(decoder.decode(msg.data)) as PubAck & {
    error?: ConstructorParameters<typeof JetStreamApiError>[0];
  };
  if (v.error) throw new JetStreamApiError(v.error);
  if (!v.stream) throw new JetStreamError('invalid ack response');
  v.duplicate = v.duplicate ?? false;
  return v;
}
