/**
 * An answer as server-sent events, shared by the log follows and the build-log follow: headers sent at
 * once, a keep-alive comment while quiet, a bound on the whole stream, and one end — the first reason
 * given wins; a client that went away gets no `end` event.
 */
import { PassThrough } from 'node:stream';
import type { Context } from 'koa';

/** One event; `id` lets a client resume with `Last-Event-ID`. */
export const sseEvent = (event: string, data: unknown, id?: number) =>
  `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

export interface EventStream<R extends string> {
  /** Aborted once the stream is ending (the client left, the bound passed, or `end` was called). */
  signal: AbortSignal;
  /** Why it ends; `client_closed` until something else says otherwise. */
  reason: R | 'client_closed' | 'max_duration';
  /** Ends the stream for `why`, unless it is already ending. */
  end(why: R | 'max_duration' | 'client_closed'): void;
  /** Writes one event; true when more than `maxBufferedBytes` wait for the client. */
  send(event: string, data: unknown, id?: number): boolean;
  /** Stops the timers, writes `end` with `endData` (not to a client that left) and closes the stream. */
  close(endData?: Record<string, unknown>): void;
}

export function openEventStream<R extends string>(
  ctx: Context,
  o: { maxMs: number; heartbeatMs: number; maxBufferedBytes: number },
): EventStream<R> {
  const abort = new AbortController();
  const out = new PassThrough();
  ctx.status = 200;
  ctx.set('content-type', 'text/event-stream; charset=utf-8');
  ctx.set('cache-control', 'no-cache');
  ctx.set('x-accel-buffering', 'no');
  ctx.body = out;
  // A first comment sends the headers now, not with the first event (which may be long in coming).
  out.write(': following\n\n');
  const maxTimer = setTimeout(() => stream.end('max_duration'), o.maxMs);
  const heartbeat = setInterval(() => out.write(': keep-alive\n\n'), o.heartbeatMs);
  const stream: EventStream<R> = {
    signal: abort.signal,
    reason: 'client_closed',
    end(why) {
      if (abort.signal.aborted) return;
      stream.reason = why;
      abort.abort();
    },
    send(event, data, id) {
      out.write(sseEvent(event, data, id));
      return out.writableLength > o.maxBufferedBytes;
    },
    close(endData) {
      clearTimeout(maxTimer);
      clearInterval(heartbeat);
      if (stream.reason !== 'client_closed')
        out.write(sseEvent('end', { reason: stream.reason, ...endData }));
      out.end();
      abort.abort();
    },
  };
  ctx.res.once('close', () => stream.end('client_closed'));
  return stream;
}
