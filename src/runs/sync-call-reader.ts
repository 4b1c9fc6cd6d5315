/**
 * Reads recorded sync calls (sync-calls.ts) back from the SYNC_CALLS stream with batched direct gets:
 * no consumer is created, and a read is bounded by the stream's per-app limit and `maxRead`.
 */
import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  type RunRecord,
  type RunState,
  SYNC_CALLS_STREAM,
  syncCallSubject,
} from '../shared/contracts/messaging.ts';

/** Messages one direct get returns at most. */
export const SYNC_CALL_READ_BATCH = 256;
/** Records one read looks at, at most (a project-wide read: 100 per app). */
export const SYNC_CALL_MAX_READ = 10_000;

export interface SyncCallReader {
  /** Newest first; every app of the project when `appName` is undefined. */
  list(
    projectId: string,
    appName: string | undefined,
    opts: { state?: RunState; limit?: number },
  ): Promise<RunRecord[]>;
  get(projectId: string, appName: string, runId: string): Promise<RunRecord | undefined>;
  find(projectId: string, runId: string): Promise<RunRecord | undefined>;
}

/** The stream is not there (no gateway recorded yet), or holds no matching record. */
function isEmpty(err: unknown): boolean {
  const m = String((err as Error)?.message ?? '');
  return /no responders|message not found|stream not found|no message found/i.test(m);
}

export function createSyncCallReader(
  nc: NatsConnection,
  opts: { timeoutMs: number; maxRead?: number },
): SyncCallReader {
  const maxRead = opts.maxRead ?? SYNC_CALL_MAX_READ;
  let jsmPromise: Promise<JetStreamManager> | undefined;
  const jsm = () => {
    jsmPromise ??= jetstreamManager(nc, { timeout: opts.timeoutMs }).catch((err) => {
      jsmPromise = undefined;
      throw err;
    });
    return jsmPromise;
  };

  /** Every record under `filter`, oldest first. */
  async function read(filter: string): Promise<RunRecord[]> {
    const m = await jsm();
    const out: RunRecord[] = [];
    let seq = 1;
    while (out.length < maxRead) {
      let last = 0;
      let pending = 0;
      try {
        const batch = await m.direct.getBatch(SYNC_CALLS_STREAM, {
          seq,
          batch: Math.min(SYNC_CALL_READ_BATCH, maxRead - out.length),
          next_by_subj: filter,
        });
        for await (const msg of batch) {
          last = msg.seq;
          pending = msg.pending;
          try {
            out.push(msg.json<RunRecord>());
          } catch {
            // not a record of ours: skipped
          }
        }
      } catch (err) {
        if (isEmpty(err)) break;
        throw err;
      }
      if (last === 0 || pending <= 0) break;
      seq = last + 1;
    }
    return out;
  }

  const newestFirst = (a: RunRecord, b: RunRecord) =>
    a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0;

  return {
    async list(projectId, appName, o) {
      const records = await read(syncCallSubject(projectId, appName ?? '*'));
      // Read oldest first (stream order), reversed before the (stable) sort: calls started in the same
      // ms, which the native data plane serves several of, stay newest first too.
      return records
        .reverse()
        .filter((r) => !o.state || r.state === o.state)
        .sort(newestFirst)
        .slice(0, o.limit ?? 100);
    },
    async get(projectId, appName, runId) {
      return (await read(syncCallSubject(projectId, appName))).find((r) => r.runId === runId);
    },
    async find(projectId, runId) {
      return (await read(syncCallSubject(projectId, '*'))).find((r) => r.runId === runId);
    },
  };
}
