/**
 * Run records: one KV entry per async run (`RUNS_BUCKET`, key `runKey()`), written by the gateway
 * (queued) and the run worker (running → terminal), read and cancelled through the management API.
 * Every change is a compare-and-set on the entry's revision, so concurrent writers never regress a state.
 */
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { KV, KvEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  RUNS_BUCKET,
  type RunRecord,
  RunState,
  runCancelSubject,
  runKey,
  runResultKey,
  runWebhookBodyKey,
  TERMINAL_RUN_STATES,
} from '../shared/contracts/messaging.ts';
import type { JetStreamPublisher } from '../shared/nats/ack-inbox.ts';

/** Attempts of one compare-and-set update before giving up (only a lost race makes it re-read). */
export const RUN_RECORD_CAS_ATTEMPTS = 10;
/** Records `list()` reads from the bucket at once. */
export const RUN_LIST_READ_BATCH = 32;
/** Largest page `list()` returns. */
export const RUN_LIST_MAX_LIMIT = 1000;
/** Bound on `createQueued`'s write when it goes through a publisher (nats.js's KV write bound too). */
export const RUN_RECORD_CREATE_TIMEOUT_MS = 5_000;

export interface RunListOptions {
  state?: RunRecord['state'];
  limit?: number;
}

export interface RunStore {
  get(projectId: string, appName: string, runId: string): Promise<RunRecord | undefined>;
  /** A run of the project whatever its app (a run id is unique in the project). */
  find(projectId: string, runId: string): Promise<RunRecord | undefined>;
  /** Newest first; every app of the project when `appName` is undefined. */
  list(projectId: string, appName: string | undefined, opts?: RunListOptions): Promise<RunRecord[]>;
  /** The kept bytes of a run's result (see RunRecord.result). */
  getResult(projectId: string, appName: string, runId: string): Promise<Uint8Array | undefined>;
  /** Stores the kept bytes of a run's result, before the record that points at them. */
  putResult(projectId: string, appName: string, runId: string, bytes: Uint8Array): Promise<void>;
  /**
   * The whole response body a finished run's webhook carries, when the result does not hold all of it:
   * written before the final record, so a redelivered run can queue its webhook job again.
   */
  getWebhookBody(projectId: string, appName: string, runId: string): Promise<Uint8Array | undefined>;
  putWebhookBody(projectId: string, appName: string, runId: string, bytes: Uint8Array): Promise<void>;
  /** Removes it once the webhook job is queued (best effort: it expires with the record anyway). */
  deleteWebhookBody(projectId: string, appName: string, runId: string): Promise<void>;
  /**
   * queued → `cancelled` at once (the worker then never starts it); running → `cancelRequested` and a
   * cancel announcement so the executing worker aborts the call and records `cancelled`; terminal →
   * unchanged. Undefined when the run does not exist.
   */
  requestCancel(projectId: string, appName: string, runId: string): Promise<RunRecord | undefined>;
  /** Writes the first record of an accepted run; false when one exists already (a worker got there first). */
  createQueued(record: RunRecord): Promise<boolean>;
  /** The record with its KV revision (0 when there is none), for a following `change` without a re-read. */
  read(projectId: string, appName: string, runId: string): Promise<VersionedRun>;
  /**
   * `update` that starts from `from` (a `read`, or the answer of an earlier `change`) instead of reading
   * the record first, and answers with the revision it wrote, so a writer that holds the run (the worker)
   * makes one round trip per change. A lost race re-reads and decides again, as `update` does.
   */
  change(
    projectId: string,
    appName: string,
    runId: string,
    change: (current: RunRecord | undefined) => RunRecord | undefined,
    from?: VersionedRun,
  ): Promise<VersionedRun>;
  /**
   * Read-modify-write under compare-and-set. `change` gets the current record (undefined when absent) and
   * returns the next one, or undefined to leave it as is. Returns what is stored afterwards. A lost race
   * re-reads and decides again; any other error (NATS unavailable, a timeout) is thrown at once, for
   * the caller to retry within its bound — `change` must then recognise a write of its own that took
   * although its answer was lost.
   */
  update(
    projectId: string,
    appName: string,
    runId: string,
    change: (current: RunRecord | undefined) => RunRecord | undefined,
  ): Promise<RunRecord | undefined>;
}

/** A run record as stored, and the KV revision it was read or written at (0: no record). */
export interface VersionedRun {
  record: RunRecord | undefined;
  revision: number;
}

export const isTerminal = (state: RunRecord['state']) => TERMINAL_RUN_STATES.includes(state);

/** The kept bytes a record carries itself (undefined: none there; look under `runResultKey()`). */
export function inlineResultBytes(rec: Pick<RunRecord, 'result'> | undefined): Buffer | undefined {
  const b64 = rec?.result?.inlineBase64;
  return b64 === undefined ? undefined : Buffer.from(b64, 'base64');
}

const encode = (r: RunRecord) => JSON.stringify(r);
function decode(e: KvEntry | null): RunRecord | undefined {
  if (e?.operation !== 'PUT') return undefined;
  return e.json<RunRecord>();
}

/** The compare-and-set lost: the entry's revision moved (or it exists, for a create). */
export function isRevisionConflict(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence ||
      err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

/**
 * `nc` is only needed for `requestCancel` on a running run (core NATS announcement). `createWith`: the
 * publisher `createQueued` writes a new record with (a KV create is a publish to the key's subject
 * expecting no message on it), e.g. the gateway's shared ack inbox; nats.js's KV client otherwise.
 */
export function createRunStore(
  kv: KV,
  nc?: NatsConnection,
  now: () => Date = () => new Date(),
  createWith?: JetStreamPublisher,
): RunStore {
  const read: RunStore['read'] = async (projectId, appName, runId) => {
    const entry = await kv.get(runKey(projectId, appName, runId));
    const record = decode(entry);
    return { record, revision: record && entry ? entry.revision : 0 };
  };

  const change: RunStore['change'] = async (projectId, appName, runId, decide, from) => {
    const key = runKey(projectId, appName, runId);
    let lastErr: unknown;
    let known = from;
    for (let i = 0; i < RUN_RECORD_CAS_ATTEMPTS; i++) {
      const current = known ?? (await read(projectId, appName, runId));
      known = undefined;
      const next = decide(current.record);
      if (!next) return current;
      try {
        const revision =
          current.revision > 0
            ? await kv.update(key, encode(next), current.revision)
            : await kv.create(key, encode(next));
        return { record: next, revision };
      } catch (err) {
        if (!isRevisionConflict(err)) throw err;
        lastErr = err; // lost the race: read again and re-decide
      }
    }
    throw new Error(`run record ${key}: too much contention`, { cause: lastErr });
  };

  const update: RunStore['update'] = async (projectId, appName, runId, decide) =>
    (await change(projectId, appName, runId, decide)).record;

  return {
    async get(projectId, appName, runId) {
      return decode(await kv.get(runKey(projectId, appName, runId)));
    },

    async find(projectId, runId) {
      for await (const k of await kv.keys(runKey(projectId, '*', runId))) return decode(await kv.get(k));
      return undefined;
    },

    async getResult(projectId, appName, runId) {
      // Small results are inside the record (RunResult.inlineBase64), larger ones under their own key:
      // both looked up at once.
      const [rec, e] = await Promise.all([
        kv.get(runKey(projectId, appName, runId)),
        kv.get(runResultKey(projectId, appName, runId)),
      ]);
      return inlineResultBytes(decode(rec)) ?? (e?.operation === 'PUT' ? e.value : undefined);
    },

    async putResult(projectId, appName, runId, bytes) {
      await kv.put(runResultKey(projectId, appName, runId), bytes);
    },

    async getWebhookBody(projectId, appName, runId) {
      const e = await kv.get(runWebhookBodyKey(projectId, appName, runId));
      return e?.operation === 'PUT' ? e.value : undefined;
    },

    async putWebhookBody(projectId, appName, runId, bytes) {
      await kv.put(runWebhookBodyKey(projectId, appName, runId), bytes);
    },

    async deleteWebhookBody(projectId, appName, runId) {
      await kv.purge(runWebhookBodyKey(projectId, appName, runId));
    },

    async list(projectId, appName, opts = {}) {
      const limit = Math.min(Math.max(opts.limit ?? 100, 1), RUN_LIST_MAX_LIMIT);
      const keys: string[] = [];
      for await (const k of await kv.keys(runKey(projectId, appName ?? '*', '*'))) keys.push(k);
      const records: RunRecord[] = [];
      for (let i = 0; i < keys.length; i += RUN_LIST_READ_BATCH) {
        const batch = await Promise.all(keys.slice(i, i + RUN_LIST_READ_BATCH).map((k) => kv.get(k)));
        for (const e of batch) {
          const r = decode(e);
          if (r && (!opts.state || r.state === opts.state)) records.push(r);
        }
      }
      records.sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
      return records.slice(0, limit);
    },

    async createQueued(record) {
      const key = runKey(record.projectId, record.appName, record.runId);
      try {
        if (createWith) {
          // A Buffer (from Node's pool): a string would be encoded by nats.js's TextEncoder into a new ArrayBuffer.
          await createWith
            .publish(`$KV.${RUNS_BUCKET}.${key}`, Buffer.from(encode(record)), {
              expect: { lastSubjectSequence: 0 },
              timeout: RUN_RECORD_CREATE_TIMEOUT_MS,
            })
            .catch((err: unknown) => {
              // A key that exists (or was deleted): nats.js's create decides, as without a publisher.
              if (isRevisionConflict(err)) return kv.create(key, encode(record));
              throw err;
            });
        } else {
          await kv.create(key, encode(record));
        }
        return true;
      } catch (err) {
        if (await kv.get(key)) return false;
        throw err;
      }
    },

    update,
    read,
    change,

    async requestCancel(projectId, appName, runId) {
      const after = await update(projectId, appName, runId, (cur) => {
        if (!cur || isTerminal(cur.state)) return undefined;
        if (cur.state === RunState.Queued) {
          return {
            ...cur,
            state: RunState.Cancelled,
            cancelRequested: true,
            finishedAt: now().toISOString(),
          };
        }
        return cur.cancelRequested ? undefined : { ...cur, cancelRequested: true };
      });
      if (after?.state === RunState.Running && after.cancelRequested && nc) {
        nc.publish(runCancelSubject(runId));
        await nc.flush();
      }
      return after;
    },
  };
}

export { ensureRunsInfrastructure } from './infrastructure.ts';
