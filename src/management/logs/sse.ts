/**
 * A log follow as server-sent events, for the logs API and the dashboard's live tail alike: `event: log`
 * per line, keep-alive comments while quiet, and an `event: end` with the reason when the server ends
 * it. Ends when the client goes away, after `maxMs`, when the client reads too slowly, or when `alive`
 * says the caller may no longer read (the dashboard's session ended).
 */
import type { Context } from 'koa';
import { openEventStream } from '../event-stream.ts';
import type { LogLine } from './types.ts';

export type FollowEndReason =
  | 'client_closed'
  | 'max_duration'
  | 'slow_client'
  | 'source_ended'
  | 'source_failed'
  | 'session_ended';

export interface SseFollowOptions {
  follow: (signal: AbortSignal) => AsyncIterable<LogLine>;
  /** The event data of a line. */
  present: (line: LogLine) => unknown;
  maxMs: number;
  heartbeatMs: number;
  /** Bytes of events waiting for the client before the follow is ended (`slow_client`). */
  maxBufferedBytes: number;
  /** Checked every `aliveEveryMs`: false ends the follow (`session_ended`). */
  alive?: () => Promise<boolean>;
  aliveEveryMs?: number;
  /** Told once how the follow ended. */
  ended?: (reason: FollowEndReason, err?: Error) => void;
}

/** Answers `ctx` with the event stream; returns at once (the follow runs until one of its ends). */
export function respondWithLogFollow(ctx: Context, o: SseFollowOptions): void {
  const stream = openEventStream<FollowEndReason>(ctx, o);
  const alive = o.alive;
  const check = alive
    ? setInterval(() => {
        alive().then(
          (ok) => ok || stream.end('session_ended'),
          () => undefined, // a store hiccup is no proof the session ended: next check decides
        );
      }, o.aliveEveryMs ?? o.heartbeatMs)
    : undefined;
  void (async () => {
    let failure: Error | undefined;
    try {
      for await (const line of o.follow(stream.signal)) {
        if (stream.signal.aborted) break;
        if (stream.send('log', o.present(line))) stream.end('slow_client');
      }
      if (!stream.signal.aborted) stream.reason = 'source_ended';
    } catch (err) {
      failure = err as Error;
      stream.reason = failure.name === 'FollowerTooSlowError' ? 'slow_client' : 'source_failed';
    } finally {
      if (check) clearInterval(check);
      stream.close();
      o.ended?.(stream.reason, failure);
    }
  })();
}
