/**
 * Runs as the management API and the dashboard read them: async runs from the run store, recorded
 * sync calls from the SYNC_CALLS stream (runs/sync-call-reader.ts), merged newest first. Only async
 * runs have kept results and can be cancelled; a sync call is over by the time it is recorded.
 */
import type { SyncCallReader } from '../runs/sync-call-reader.ts';
import type { RunRecord } from '../shared/contracts/messaging.ts';
import type { RunReader } from './readers.ts';

const newestFirst = (a: RunRecord, b: RunRecord) =>
  a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0;

export function withSyncCalls(runs: RunReader, calls: SyncCallReader): RunReader {
  return {
    async get(projectId, appName, runId) {
      return (await runs.get(projectId, appName, runId)) ?? calls.get(projectId, appName, runId);
    },
    async find(projectId, runId) {
      return (await runs.find(projectId, runId)) ?? calls.find(projectId, runId);
    },
    async list(projectId, appName, opts) {
      const { mode, ...rest } = opts;
      if (mode === 'async') return runs.list(projectId, appName, rest);
      if (mode === 'sync') return calls.list(projectId, appName, rest);
      const [a, s] = await Promise.all([
        runs.list(projectId, appName, rest),
        calls.list(projectId, appName, rest),
      ]);
      return [...a, ...s].sort(newestFirst).slice(0, opts.limit ?? 100);
    },
    getResult: (projectId, appName, runId) => runs.getResult(projectId, appName, runId),
    requestCancel: (projectId, appName, runId) => runs.requestCancel(projectId, appName, runId),
  };
}
