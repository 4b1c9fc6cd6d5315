/**
 * Local mode's log source: the last lines of each app process, kept in a bounded ring per app, and
 * followers fed as lines arrive. A follower that falls `maxQueuedLines` behind is ended (never buffered
 * without bound); the logs route tells its client why.
 */
import { requestIdOf } from '../management/logs/parse.ts';
import type { LogLine, LogQuery, LogSource } from '../management/logs/types.ts';

export interface AppLogSettings {
  /** Lines kept per app (older ones are forgotten). */
  linesPerApp: number;
  /** Lines a follower may fall behind before it is ended. */
  maxQueuedLines: number;
}

export const DEFAULT_APP_LOG_SETTINGS: AppLogSettings = { linesPerApp: 2_000, maxQueuedLines: 1_000 };

export class FollowerTooSlowError extends Error {
  override readonly name = 'FollowerTooSlowError';
}

interface Follower {
  queue: LogLine[];
  wake?: () => void;
  overflow: boolean;
}

export interface AppLogs extends LogSource {
  /** Records one output line of an app process. */
  add(app: string, pid: number | undefined, stream: 'stdout' | 'stderr', line: string, now?: number): void;
  /** Follows of an app open now. */
  followers(app: string): number;
}

export function createAppLogs(
  projectId: string,
  settings: AppLogSettings = DEFAULT_APP_LOG_SETTINGS,
): AppLogs {
  const rings = new Map<string, LogLine[]>();
  const followers = new Map<string, Set<Follower>>();

  const select = (app: string, q: LogQuery, maxLines: number): LogLine[] => {
    let lines = rings.get(app) ?? [];
    if (q.sinceMs !== undefined) {
      const since = q.sinceMs;
      lines = lines.filter((l) => Date.parse(l.time as string) >= since);
    }
    const n = Math.min(q.tail ?? maxLines, maxLines);
    return lines.slice(Math.max(0, lines.length - n));
  };

  return {
    add(app, pid, stream, line, now = Date.now()) {
      const requestId = requestIdOf(line);
      const entry: LogLine = {
        time: new Date(now).toISOString(),
        replica: `local-${pid ?? 0}`,
        stream,
        message: line,
        ...(requestId ? { requestId } : {}),
      };
      const ring = rings.get(app) ?? [];
      rings.set(app, ring);
      ring.push(entry);
      if (ring.length > settings.linesPerApp) ring.splice(0, ring.length - settings.linesPerApp);
      for (const f of followers.get(app) ?? []) {
        if (f.queue.length >= settings.maxQueuedLines) f.overflow = true;
        else f.queue.push(entry);
        f.wake?.();
      }
    },

    followers: (app) => followers.get(app)?.size ?? 0,

    async read(p, app, q, maxLines) {
      return p === projectId ? select(app, q, maxLines) : [];
    },

    async *follow(p, app, q, signal) {
      if (p !== projectId) return;
      const f: Follower = { queue: select(app, q, settings.maxQueuedLines), overflow: false };
      const set = followers.get(app) ?? new Set<Follower>();
      followers.set(app, set);
      set.add(f);
      const onAbort = () => f.wake?.();
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        while (!signal.aborted) {
          const next = f.queue.shift();
          if (next) {
            yield next;
            continue;
          }
          if (f.overflow)
            throw new FollowerTooSlowError(
              `the reader fell more than ${settings.maxQueuedLines} lines behind`,
            );
          await new Promise<void>((r) => {
            f.wake = r;
          });
          f.wake = undefined;
        }
      } finally {
        signal.removeEventListener('abort', onAbort);
        set.delete(f);
      }
    },
  };
}
