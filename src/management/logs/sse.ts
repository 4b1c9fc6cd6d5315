/**
 * A log follow as server-sent events, for the logs API and the dashboard's live tail alike: `event: log`
 * per line, keep-alive comments while quiet, and an `event: end` with the reason when the server ends
 * it. Ends when the client goes away, after `maxMs`, when the client reads too slowly, or when `alive`
 * says the caller may no longer read (the dashboard's session ended).
 */
import { PassThrough } from 'node:stream';
import type { Context } from 'koa';
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

const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/** Answers `ctx` with the event stream; returns at once (the follow runs until one of its ends). */
export function respondWithLogFollow(ctx: Context, o: SseFollowOptions): void {
  const abort = new AbortController();
  const out = new PassThrough();
  let reason: FollowEndReason = 'client_closed';
  const end = (why: FollowEndReason) => {
    if (abort.signal.aborted) return;
    reason = why;
    abort.abort();
  };
  ctx.res.once('close', () => end('client_closed'));
  ctx.status = 200;
  ctx.set('content-type', 'text/event-stream; charset=utf-8');
  ctx.set('cache-control', 'no-cache');
  ctx.set('x-accel-buffering', 'no');
  ctx.body = out;
  // A first comment sends the headers now, not with the first line (which may be long in coming).
  out.write(': following\n\n');
  const maxTimer = setTimeout(() => end('max_duration'), o.maxMs);
  const heartbeat = setInterval(() => out.write(': keep-alive\n\n'), o.heartbeatMs);
  const alive = o.alive;
  const check = alive
    ? setInterval(() => {
        alive().then(
          (ok) => ok || end('session_ended'),
          () => undefined, // a store hiccup is no proof the session ended: next check decides
        );
      }, o.aliveEveryMs ?? o.heartbeatMs)
    : undefined;
  void (async () => {
    let failure: Error | undefined;
    try {
      for await (const line of o.follow(abort.signal)) {
        if (abort.signal.aborted) break;
        out.write(sse('log', o.present(line)));
        if (out.writableLength > o.maxBufferedBytes) end('slow_client');
      }
      if (!abort.signal.aborted) reason = 'source_ended';
    } catch (err) {
      failure = err as Error;
      reason = failure.name === 'FollowerTooSlowError' ? 'slow_client' : 'source_failed';
    } finally {
      clearTimeout(maxTimer);
      clearInterval(heartbeat);
      if (check) clearInterval(check);
      if (reason !== 'client_closed') out.write(sse('end', { reason }));
      out.end();
      abort.abort();
      o.ended?.(reason, failure);
    }
  })();
}
