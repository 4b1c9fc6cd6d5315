/**
 * Sync calls as run records (`mode: 'sync'`), so the dashboard and the runs API show them beside async
 * runs. Off the caller's path on purpose: the gateway publishes a small record (no body) on core NATS
 * once the response is over and never waits for JetStream; a per-app and a per-process rate bound keep
 * the cost flat under load (calls over the bound are not recorded, and counted). The SYNC_CALLS stream
 * keeps the newest records of each app (shared/nats/jetstream.ts). docs/runs.md#sync-calls.
 */
import type { RunRecord, RunState } from '../shared/contracts/messaging.ts';
import { syncCallSubject } from '../shared/contracts/messaging.ts';
import { ErrorCode } from '../shared/errors.ts';

export interface SyncCallSettings {
  /** Records per second for one app (per gateway process); 0 records no sync call. */
  perAppPerSecond: number;
  /** Records per second for all apps together (per gateway process). */
  perSecond: number;
}

export const DEFAULT_SYNC_CALL_SETTINGS: SyncCallSettings = { perAppPerSecond: 10, perSecond: 200 };

/** A finished sync call, as the gateway's access log sees it. */
export interface SyncCall {
  requestId: string;
  projectId: string;
  appName: string;
  path: string;
  status: number;
  /** The gateway's own error code, when it answered with an error instead of the app. */
  errorCode?: string;
  errorMessage?: string;
  startedAtMs: number;
  finishedAtMs: number;
  /** The caller went away before the response was complete. */
  aborted: boolean;
  /** The app answered text/event-stream. */
  streamed: boolean;
  /** Host of the webhook the response is forwarded to. */
  webhookHost?: string;
}

const iso = (ms: number) => new Date(ms).toISOString();

function stateOf(c: SyncCall): RunState {
  if (c.aborted) return 'cancelled';
  if (c.errorCode === ErrorCode.UpstreamTimeout) return 'timeout';
  return c.status < 400 ? 'success' : 'failure';
}

/** The run record of a finished sync call (pure). */
export function syncCallRecord(c: SyncCall): RunRecord {
  const error = c.aborted
    ? { code: 'client_closed', message: 'the caller went away before the response was complete' }
    : c.errorCode
      ? { code: c.errorCode, message: c.errorMessage ?? c.errorCode }
      : undefined;
  return {
    mode: 'sync',
    runId: c.requestId,
    projectId: c.projectId,
    appName: c.appName,
    path: c.path,
    state: stateOf(c),
    createdAt: iso(c.startedAtMs),
    startedAt: iso(c.startedAtMs),
    finishedAt: iso(c.finishedAtMs),
    executions: 1,
    // The status the caller got (the app's, or the gateway's own error status).
    responseStatus: c.status,
    ...(error ? { error } : {}),
    ...(c.streamed ? { streamed: true } : {}),
    ...(c.webhookHost ? { webhookHost: c.webhookHost } : {}),
  };
}

/**
 * Admits at most `perAppPerSecond` records per app and `perSecond` in all within each wall-clock
 * second. Memory: one counter per app seen in the current second.
 */
export function createSyncCallLimiter(
  s: SyncCallSettings,
): (projectId: string, appName: string, nowMs: number) => boolean {
  let second = -1;
  let total = 0;
  // project → app → records this second: no joined key string to build and hash per call.
  const perApp = new Map<string, Map<string, number>>();
  return (projectId, appName, nowMs) => {
    if (s.perAppPerSecond <= 0) return false;
    const now = Math.floor(nowMs / 1000);
    if (now !== second) {
      second = now;
      total = 0;
      perApp.clear();
    }
    if (total >= s.perSecond) return false;
    let apps = perApp.get(projectId);
    if (!apps) {
      apps = new Map();
      perApp.set(projectId, apps);
    }
    const n = apps.get(appName) ?? 0;
    if (n >= s.perAppPerSecond) return false;
    apps.set(appName, n + 1);
    total++;
    return true;
  };
}

export interface SyncCallRecorder {
  /** Records the call if the rate bounds allow it; never throws, never waits. */
  record(call: SyncCall): void;
  /**
   * `record` in two steps, for a caller that builds the call only when it is to be recorded (under load
   * most calls are over the rate bounds): whether a call of this app, finished at `finishedAtMs`, is
   * within them (taking its place; one over them is counted as skipped), then `recordAdmitted`. Never
   * throws, never waits.
   */
  admit(projectId: string, appName: string, finishedAtMs: number): boolean;
  /** Records a call `admit` let through; never throws, never waits. */
  recordAdmitted(call: SyncCall): void;
}

export type SyncCallSkip = 'rate' | 'disconnected' | 'publish_failed';

export function createSyncCallRecorder(deps: {
  /** Core NATS publish (fire and forget): the SYNC_CALLS stream stores what reaches it. */
  publish: (subject: string, data: string) => void;
  /**
   * Whether NATS is connected now. While it is not, records are dropped rather than queued: the
   * client buffers publishes without a bound until it reconnects.
   */
  connected?: () => boolean;
  settings: SyncCallSettings;
  /** A call not recorded, and why (metrics). */
  skipped?: (why: SyncCallSkip) => void;
}): SyncCallRecorder {
  const limit = createSyncCallLimiter(deps.settings);
  const admit = (projectId: string, appName: string, finishedAtMs: number): boolean => {
    // Also called from the access log's 'close' listener: a throw here would be an uncaught exception.
    try {
      if (deps.settings.perAppPerSecond <= 0) return false;
      if (limit(projectId, appName, finishedAtMs)) return true;
      deps.skipped?.('rate');
    } catch {
      deps.skipped?.('publish_failed');
    }
    return false;
  };
  const recordAdmitted = (call: SyncCall): void => {
    // Called from the access log's 'close' listener: a throw here would be an uncaught exception.
    try {
      if (deps.connected && !deps.connected()) {
        deps.skipped?.('disconnected');
        return;
      }
      deps.publish(syncCallSubject(call.projectId, call.appName), JSON.stringify(syncCallRecord(call)));
    } catch {
      // A closed connection or a record that cannot be written: not worth more than the call.
      deps.skipped?.('publish_failed');
    }
  };
  return {
    record(call) {
      if (admit(call.projectId, call.appName, call.finishedAtMs)) recordAdmitted(call);
    },
    admit,
    recordAdmitted,
  };
}
