/**
 * The gateway's shared ack inbox against a real JetStream: each publish gets its own ack (stream and
 * sequence) however many are in flight, a repeated message id is stored once, JetStream's refusals come
 * back as nats.js's errors (a KV create on an existing key is a revision conflict), and every wait ends
 * at its bound — a late ack is dropped, nothing stays pending.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection, TimeoutError } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { isRevisionConflict } from '../../../src/runs/store.ts';
import { type AckInbox, createAckInbox } from '../../../src/shared/nats/ack-inbox.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';

const STREAM = 'ACK_INBOX_TEST';

let nats: NatsServer;
let nc: NatsConnection;
let acks: AckInbox;

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: STREAM, subjects: ['acked.>'], duplicate_window: 60_000_000_000 });
  acks = createAckInbox(nc);
});

afterAll(async () => {
  acks?.close();
  await nc?.close();
  await nats?.stop();
});

it('answers each of many concurrent publishes with the sequence its own message was stored at', async () => {
  const n = 200;
  const answers = await Promise.all(
    Array.from({ length: n }, (_, i) => acks.publish('acked.many', `m${i}`, { timeout: 5_000 })),
  );
  expect(new Set(answers.map((a) => a.seq)).size).toBe(n);
  const jsm = await jetstreamManager(nc);
  for (const [i, a] of answers.entries()) {
    expect(a).toMatchObject({ stream: STREAM, duplicate: false });
    const stored = await jsm.streams.getMessage(STREAM, { seq: a.seq });
    expect(stored?.string()).toBe(`m${i}`);
  }
  expect(acks.pending()).toBe(0);
});

it('stores a message id once: the repeat is acked as a duplicate of the first', async () => {
  const first = await acks.publish('acked.dedup', 'one', { msgID: 'run-1', timeout: 5_000 });
  const again = await acks.publish('acked.dedup', 'two', { msgID: 'run-1', timeout: 5_000 });
  expect(first.duplicate).toBe(false);
  expect(again).toMatchObject({ seq: first.seq, duplicate: true });
  const info = await (await jetstreamManager(nc)).streams.info(STREAM, { subjects_filter: 'acked.dedup' });
  expect(info.state.subjects?.['acked.dedup']).toBe(1);
});

it('refuses an expected last sequence that does not hold, as a revision conflict', async () => {
  const created = await acks.publish('acked.create', 'a', {
    expect: { lastSubjectSequence: 0 },
    timeout: 5_000,
  });
  expect(created.seq).toBeGreaterThan(0);
  const refused = await acks
    .publish('acked.create', 'b', { expect: { lastSubjectSequence: 0 }, timeout: 5_000 })
    .catch((e: unknown) => e);
  expect(isRevisionConflict(refused)).toBe(true);
  const next = await acks.publish('acked.create', 'c', {
    expect: { lastSubjectSequence: created.seq },
    timeout: 5_000,
  });
  expect(next.seq).toBeGreaterThan(created.seq);
});

it('fails a publish no stream takes (no responders) instead of waiting for its bound', async () => {
  // A bound far past the test's own timeout: waiting for it would fail the test.
  await expect(acks.publish('not.a.stream', 'x', { timeout: 600_000 })).rejects.toThrow(/no responders/i);
  expect(acks.pending()).toBe(0);
});

it('ends a wait at its bound, and drops the ack that arrives after it', async () => {
  // A responder that answers late, like a JetStream leader that acks after the caller gave up.
  const late: Array<() => void> = [];
  const sub = nc.subscribe('slow.ack', {
    callback: (_err, msg) => {
      late.push(() => msg.respond(JSON.stringify({ stream: STREAM, seq: 1 })));
    },
  });
  try {
    const err = await acks.publish('slow.ack', 'x', { timeout: 200 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect(acks.pending()).toBe(0);
    for (const answer of late) answer();
    await nc.flush();
    // The inbox still works after the stray ack.
    expect((await acks.publish('acked.after', 'y', { timeout: 5_000 })).stream).toBe(STREAM);
  } finally {
    sub.unsubscribe();
  }
});

it('fails what is still waiting when closed', async () => {
  const own = createAckInbox(nc);
  const sub = nc.subscribe('never.acked', { callback: () => undefined });
  try {
    const waiting = own.publish('never.acked', 'x', { timeout: 60_000 });
    own.close();
    await expect(waiting).rejects.toThrow(/closed/);
    expect(own.pending()).toBe(0);
  } finally {
    sub.unsubscribe();
  }
});

it('is what nats.js publishes with: the stored message carries the id header', async () => {
  const a = await acks.publish('acked.header', 'h', { msgID: 'id-h', timeout: 5_000 });
  const m = await (await jetstreamManager(nc)).streams.getMessage(STREAM, { seq: a.seq });
  expect(m?.header.get('Nats-Msg-Id')).toBe('id-h');
  // and the same id through nats.js's own client is the duplicate of it
  expect((await jetstream(nc).publish('acked.header', 'h', { msgID: 'id-h' })).duplicate).toBe(true);
});

it('answers many more publishes in flight than it has slots, each with its own ack', async () => {
  const own = createAckInbox(nc, { slots: 2 });
  try {
    const n = 300;
    const answers = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        own.publish('acked.grow', `g${i}`, { msgID: `grow-${i}`, timeout: 5_000 }),
      ),
    );
    expect(new Set(answers.map((a) => a.seq)).size).toBe(n);
    const jsm = await jetstreamManager(nc);
    for (const [i, a] of answers.entries()) {
      expect(a.duplicate).toBe(false);
      expect((await jsm.streams.getMessage(STREAM, { seq: a.seq }))?.string()).toBe(`g${i}`);
    }
    expect(own.pending()).toBe(0);
  } finally {
    own.close();
  }
});

it('fails a publish whose ack never comes at its bound, while the others in flight are answered', async () => {
  const own = createAckInbox(nc, { slots: 4 });
  const sub = nc.subscribe('never.acked', { callback: () => undefined });
  try {
    const lost = own.publish('never.acked', 'x', { timeout: 1_000 }).catch((e: unknown) => e);
    // One at a time, the tokens come round to its slot again and again: passed over, not overwritten.
    for (let i = 0; i < 10; i++) {
      expect((await own.publish('acked.around', `b${i}`, { timeout: 5_000 })).stream).toBe(STREAM);
      expect(own.pending()).toBe(1);
    }
    // Many at once: the slots grow around it.
    const others = await Promise.all(
      Array.from({ length: 20 }, (_, i) => own.publish('acked.around', `a${i}`, { timeout: 5_000 })),
    );
    expect(others.every((a) => a.stream === STREAM)).toBe(true);
    expect(own.pending()).toBe(1);
    expect(await lost).toBeInstanceOf(TimeoutError);
    expect(own.pending()).toBe(0);
  } finally {
    sub.unsubscribe();
    own.close();
  }
});

it('drops a late ack whose slot another publish holds now, and answers that one with its own ack', async () => {
  // One slot: the late publish's token and the next one's share it.
  const own = createAckInbox(nc, { slots: 1 });
  const late: Array<() => void> = [];
  const sub = nc.subscribe('slow.ack2', {
    callback: (_err, msg) => {
      late.push(() => msg.respond(JSON.stringify({ stream: 'NOT_THIS_ONE', seq: 424242 })));
    },
  });
  const hold = nc.subscribe('held.ack', {
    callback: (_err, msg) => {
      late.push(() => msg.respond(JSON.stringify({ stream: STREAM, seq: 7 })));
    },
  });
  try {
    expect(await own.publish('slow.ack2', 'x', { timeout: 100 }).catch((e: unknown) => e)).toBeInstanceOf(
      TimeoutError,
    );
    const waiting = own.publish('held.ack', 'y', { timeout: 5_000 });
    await nc.flush();
    expect(own.pending()).toBe(1);
    (late.shift() as () => void)(); // the first publish's late ack, into the slot the second holds
    await nc.flush();
    expect(own.pending()).toBe(1);
    (late.shift() as () => void)();
    expect(await waiting).toMatchObject({ stream: STREAM, seq: 7 });
    expect(own.pending()).toBe(0);
  } finally {
    sub.unsubscribe();
    hold.unsubscribe();
    own.close();
  }
});

it('fails every publish still waiting when closed, however many slots they hold', async () => {
  const own = createAckInbox(nc, { slots: 2 });
  const sub = nc.subscribe('never.acked2', { callback: () => undefined });
  try {
    const waiting = Array.from({ length: 10 }, () =>
      own.publish('never.acked2', 'x', { timeout: 60_000 }).catch((e: unknown) => e),
    );
    own.close();
    for (const err of await Promise.all(waiting)) expect(String(err)).toMatch(/closed/);
    expect(own.pending()).toBe(0);
  } finally {
    sub.unsubscribe();
  }
});

it('gives the slots grown for a burst back once the last publish waiting has failed at its bound', async () => {
  const own = createAckInbox(nc, { slots: 4 });
  const sub = nc.subscribe('never.acked3', { callback: () => undefined });
  try {
    const lost = own.publish('never.acked3', 'x', { timeout: 300 }).catch((e: unknown) => e);
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => own.publish('acked.shrink', `s${i}`, { timeout: 5_000 })),
    );
    expect(own.slots()).toBeGreaterThan(4);
    expect(await lost).toBeInstanceOf(TimeoutError);
    expect(own.slots()).toBe(4);
  } finally {
    sub.unsubscribe();
    own.close();
  }
});

it('halves the slots grown for a burst while a slow publish still waits, and still answers it', async () => {
  const own = createAckInbox(nc, { slots: 4 });
  let answer: (() => void) | undefined;
  const sub = nc.subscribe('held.ack3', {
    callback: (_err, msg) => {
      answer = () => msg.respond(JSON.stringify({ stream: STREAM, seq: 9 }));
    },
  });
  try {
    const held = own.publish('held.ack3', 'x', { timeout: 60_000 });
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => own.publish('acked.halve', `h${i}`, { timeout: 5_000 })),
    );
    expect(own.slots()).toBeGreaterThan(4);
    // The bound check (every ACK_BOUND_CHECK_MS) halves them while the held one waits.
    await vi.waitFor(() => expect(own.slots()).toBe(4), { timeout: 10_000, interval: 20 });
    expect(own.pending()).toBe(1);
    (answer as () => void)();
    expect(await held).toMatchObject({ stream: STREAM, seq: 9 });
    expect(own.pending()).toBe(0);
  } finally {
    sub.unsubscribe();
    own.close();
  }
});
