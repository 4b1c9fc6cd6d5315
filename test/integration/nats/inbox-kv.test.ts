/**
 * A KV bucket over the shared ack inbox against a real JetStream: every get and write answers what
 * nats.js's own bucket answers for the same key — the value, revision and operation of the last entry, a
 * compare-and-set refused as a revision conflict, a create over a deleted or purged key, the refusal when
 * the bucket is gone — and nothing is left waiting on the inbox.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { isRevisionConflict } from '../../../src/runs/store.ts';
import { type AckInbox, createAckInbox } from '../../../src/shared/nats/ack-inbox.ts';
import { kvOverInbox } from '../../../src/shared/nats/inbox-kv.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';

let nats: NatsServer;
let nc: NatsConnection;
let acks: AckInbox;
let plain: KV;
let fast: KV;

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
  plain = await new Kvm(nc).create('INBOX_KV_TEST', { history: 3 });
  acks = createAckInbox(nc);
  fast = kvOverInbox(plain, acks);
});

afterAll(async () => {
  acks?.close();
  await nc?.close();
  await nats?.stop();
});

/** What a reader sees of an entry, from either bucket. */
async function seen(kv: KV, key: string) {
  const e = await kv.get(key);
  return e && { key: e.key, revision: e.revision, operation: e.operation, value: e.string() };
}

it('is a different object only for a bucket it can address, and reads what nats.js reads', async () => {
  expect(fast).not.toBe(plain);
  expect(await fast.get('absent')).toBeNull();

  const rev = await fast.put('a.b', '{"n":1}');
  expect(await seen(fast, 'a.b')).toEqual({ key: 'a.b', revision: rev, operation: 'PUT', value: '{"n":1}' });
  expect(await seen(fast, 'a.b')).toEqual(await seen(plain, 'a.b'));
  expect((await fast.get('a.b'))?.json()).toEqual({ n: 1 });

  // The last entry of a key, not the first; a key that is a prefix of another is its own.
  const rev2 = await plain.put('a.b', 'two');
  await plain.put('a.bc', 'other');
  expect(await seen(fast, 'a.b')).toEqual({ key: 'a.b', revision: rev2, operation: 'PUT', value: 'two' });
  // An older revision asked for explicitly (nats.js's own path).
  expect((await fast.get('a.b', { revision: rev }))?.string()).toBe('{"n":1}');

  await plain.delete('a.b');
  expect(await seen(fast, 'a.b')).toEqual(await seen(plain, 'a.b'));
  expect((await fast.get('a.b'))?.operation).toBe('DEL');
  expect(acks.pending()).toBe(0);
});

it('writes under compare-and-set as nats.js does: create once, update from the revision read', async () => {
  const created = await fast.create('cas', 'v1');
  expect(isRevisionConflict(await fast.create('cas', 'again').catch((e: unknown) => e))).toBe(true);
  expect(isRevisionConflict(await plain.create('cas', 'again').catch((e: unknown) => e))).toBe(true);

  const updated = await fast.update('cas', 'v2', created);
  expect(updated).toBeGreaterThan(created);
  // A writer that read the older revision loses, as with nats.js's bucket.
  expect(isRevisionConflict(await fast.update('cas', 'v3', created).catch((e: unknown) => e))).toBe(true);
  expect(isRevisionConflict(await plain.update('cas', 'v3', created).catch((e: unknown) => e))).toBe(true);
  expect(await seen(plain, 'cas')).toMatchObject({ revision: updated, value: 'v2' });

  // put with an expected revision, and bytes as the value
  const bytes = new TextEncoder().encode('v4');
  const put = await fast.put('cas', bytes, { previousSeq: updated });
  expect((await plain.get('cas'))?.revision).toBe(put);
  expect(await seen(plain, 'cas')).toMatchObject({ value: 'v4' });
  expect(acks.pending()).toBe(0);
});

it('creates a key whose last entry is a delete or purge marker', async () => {
  await fast.create('gone', 'first');
  await plain.delete('gone');
  const again = await fast.create('gone', 'second');
  expect(await seen(plain, 'gone')).toEqual({
    key: 'gone',
    revision: again,
    operation: 'PUT',
    value: 'second',
  });

  await plain.purge('gone');
  const third = await fast.create('gone', 'third');
  expect(await seen(plain, 'gone')).toMatchObject({ revision: third, value: 'third' });
});

it('fails as nats.js does when the bucket is gone: no entry read, a write refused at once', async () => {
  const kv = await new Kvm(nc).create('INBOX_KV_GONE');
  const over = kvOverInbox(kv, acks);
  await over.put('k', 'v');
  await (await jetstreamManager(nc)).streams.delete('KV_INBOX_KV_GONE');

  const [ours, theirs] = (await Promise.all([
    over.put('k', 'w').catch((e: unknown) => e),
    kv.put('k', 'w').catch((e: unknown) => e),
  ])) as [Error, Error];
  expect(ours).toBeInstanceOf(Error);
  expect(ours.name).toBe(theirs.name);
  expect(ours.message).toBe(theirs.message);

  const [got, gotTheirs] = await Promise.all([
    over.get('k').catch((e: unknown) => e as Error),
    kv.get('k').catch((e: unknown) => e as Error),
  ]);
  expect(got).toBeInstanceOf(Error);
  expect((got as Error).message).toMatch(/no responders/i);
  expect(gotTheirs).toBeInstanceOf(Error);
  expect(acks.pending()).toBe(0);
});

it('leaves a bucket without direct gets to nats.js', async () => {
  const kv = await new Kvm(nc).create('INBOX_KV_NO_DIRECT', { allow_direct: false });
  expect(kvOverInbox(kv, acks)).toBe(kv);
});
