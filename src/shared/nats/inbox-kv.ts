/**
 * A KV bucket whose hot operations (get, create, update, put) send their requests through a shared ack
 * inbox (ack-inbox.ts) instead of nats.js's `request()`, which builds a mux entry, a timeout promise and a
 * `RequestError` with a captured stack for every request it resolves (~12% of the run worker's CPU, which
 * reads and writes its run record three or four times per run). Everything else is the bucket's own.
 *
 * The answers are nats.js's: the same subjects and headers, a direct get's reply turned into the entry
 * by the bucket itself (`smToEntry`), a create that finds a deleted or purged key writing over it, the
 * same error classes (JetStream's refusals as `JetStreamApiError` with their codes, "no responders" on a
 * write as `JetStreamNotEnabled`, `TimeoutError` at the bound). A bucket this does not know how to address
 * (a mirror, another account's API prefix, no direct get) is returned unchanged.
 */
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { DirectMsgImpl, JetStreamStatus, jserrors } from '@nats-io/jetstream/internal';
import type { KV, KvEntry, KvPutOptions } from '@nats-io/kv';
import { Bucket, validateKey } from '@nats-io/kv/internal';
import { NoRespondersError, type Payload } from '@nats-io/transport-node';
import type { AckInbox } from './ack-inbox.ts';

/** Bound on one get or write: nats.js's default JetStream request timeout, which the bucket used. */
export const INBOX_KV_TIMEOUT_MS = 5_000;

export function kvOverInbox(kv: KV, inbox: AckInbox): KV {
  if (!isPlainBucket(kv)) return kv;
  const stream = kv.bucketName();
  const prefix = `$KV.${kv.bucket}.`;

  const key = (k: string) => {
    const ek = kv.encodeKey(k);
    validateKey(ek);
    return ek;
  };

  const get = async (k: string): Promise<KvEntry | null> => {
    const subject = prefix + key(k);
    const r = await inbox.request(`$JS.API.DIRECT.GET.${stream}.${subject}`, '', {
      timeout: INBOX_KV_TIMEOUT_MS,
    });
    if (r.headers?.code !== 0) {
      const status = new JetStreamStatus(r);
      if (status.isMessageNotFound()) return null;
      throw status.toError();
    }
    const entry = kv.smToEntry(new DirectMsgImpl(r));
    return (entry as KvEntry & { rawKey: string }).rawKey === subject.slice(prefix.length) ? entry : null;
  };

  const write = async (k: string, data: Payload, previousSeq?: number, timeout?: number) => {
    const subject = prefix + key(k);
    try {
      const ack = await inbox.publish(subject, kv.codec.value.encode(data), {
        timeout: timeout ?? INBOX_KV_TIMEOUT_MS,
        ...(previousSeq !== undefined ? { expect: { lastSubjectSequence: previousSeq } } : {}),
      });
      return ack.seq;
    } catch (err) {
      if (err instanceof NoRespondersError)
        throw new jserrors.JetStreamNotEnabled('jetstream is not enabled', { cause: err });
      throw err;
    }
  };

  // The bucket itself, with four methods replaced: the rest (keys, purge, watch, status...) is nats.js's.
  const fast = Object.create(kv) as Bucket;
  fast.get = (k, opts) => (opts?.revision ? kv.get(k, opts) : get(k));
  fast.put = (k, data, opts?: Partial<KvPutOptions>) =>
    opts && Object.keys(opts).some((o) => o !== 'previousSeq' && o !== 'timeout')
      ? kv.put(k, data, opts)
      : write(k, data, opts?.previousSeq, opts?.timeout);
  fast.update = (k, data, version, timeout) => {
    if (version <= 0) throw new Error('version must be greater than 0');
    return write(k, data, version, timeout);
  };
  fast.create = async (k, data, markerTTL) => {
    if (markerTTL) return kv.create(k, data, markerTTL);
    try {
      return await write(k, data, 0);
    } catch (err) {
      if (!isWrongLastSequence(err)) throw err;
      // As nats.js: a key whose last entry is a delete or purge marker is written over.
      const e = await get(k);
      if (e?.operation === 'DEL' || e?.operation === 'PURGE') return write(k, data, e.revision);
      throw err;
    }
  };
  return fast;
}

function isPlainBucket(kv: KV): kv is Bucket {
  return (
    kv instanceof Bucket &&
    kv.direct &&
    kv.prefix === `$KV.${kv.bucket}` &&
    kv.editPrefix === '' &&
    !kv.useJsPrefix
  );
}

const isWrongLastSequence = (err: unknown) =>
  err instanceof JetStreamApiError &&
  (err.code === JetStreamApiCodes.StreamWrongLastSequence ||
    err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);
