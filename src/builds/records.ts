/**
 * Build records: one KV entry per deploy (`BUILDS_BUCKET`, key `buildKey()`), written under
 * compare-and-set so concurrent writers never regress a state, plus each app's newest build id, which
 * decides that an older build finishing late is not applied over a newer one.
 */
import type { KV, KvEntry } from '@nats-io/kv';
import {
  type BuildRecord,
  buildKey,
  latestBuildKey,
  TERMINAL_BUILD_STATES,
} from '../shared/contracts/builds.ts';

export const BUILD_RECORD_CAS_ATTEMPTS = 10;
export const BUILD_LIST_READ_BATCH = 32;

export interface BuildStore {
  get(projectId: string, appName: string, buildId: string): Promise<BuildRecord | undefined>;
  /** Newest first. */
  list(projectId: string, appName: string, limit: number): Promise<BuildRecord[]>;
  /** Writes a new record and makes it the app's newest build. */
  create(record: BuildRecord): Promise<void>;
  update(
    projectId: string,
    appName: string,
    buildId: string,
    change: (current: BuildRecord) => BuildRecord | undefined,
  ): Promise<BuildRecord | undefined>;
  latest(projectId: string, appName: string): Promise<string | undefined>;
  /** Forgets an app's builds (its deletion). */
  removeApp(projectId: string, appName: string): Promise<void>;
}

export const isTerminalBuild = (r: BuildRecord) => TERMINAL_BUILD_STATES.includes(r.state);

const decode = (e: KvEntry | null): BuildRecord | undefined =>
  e?.operation === 'PUT' ? e.json<BuildRecord>() : undefined;

export function createBuildStore(kv: KV): BuildStore {
  return {
    async get(projectId, appName, buildId) {
      return decode(await kv.get(buildKey(projectId, appName, buildId)));
    },

    async list(projectId, appName, limit) {
      const keys: string[] = [];
      for await (const k of await kv.keys(buildKey(projectId, appName, '*'))) keys.push(k);
      const out: BuildRecord[] = [];
      for (let i = 0; i < keys.length; i += BUILD_LIST_READ_BATCH) {
        const batch = await Promise.all(keys.slice(i, i + BUILD_LIST_READ_BATCH).map((k) => kv.get(k)));
        for (const e of batch) {
          const r = decode(e);
          if (r) out.push(r);
        }
      }
      out.sort((a, b) =>
        a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : a.buildId < b.buildId ? 1 : -1,
      );
      return out.slice(0, limit);
    },

    async create(record) {
      await kv.create(buildKey(record.projectId, record.appName, record.buildId), JSON.stringify(record));
      await kv.put(latestBuildKey(record.projectId, record.appName), record.buildId);
    },

    async update(projectId, appName, buildId, change) {
      const key = buildKey(projectId, appName, buildId);
      let lastErr: unknown;
      for (let i = 0; i < BUILD_RECORD_CAS_ATTEMPTS; i++) {
        const entry = await kv.get(key);
        const current = decode(entry);
        if (!current || !entry) return undefined;
        const next = change(current);
        if (!next) return current;
        try {
          await kv.update(key, JSON.stringify(next), entry.revision);
          return next;
        } catch (err) {
          lastErr = err;
        }
      }
      throw new Error(`build record ${key}: too much contention`, { cause: lastErr });
    },

    async latest(projectId, appName) {
      const e = await kv.get(latestBuildKey(projectId, appName));
      return e?.operation === 'PUT' ? e.string() : undefined;
    },

    async removeApp(projectId, appName) {
      const keys: string[] = [];
      for await (const k of await kv.keys(buildKey(projectId, appName, '*'))) keys.push(k);
      keys.push(latestBuildKey(projectId, appName));
      for (const k of keys) await kv.purge(k);
    },
  };
}
