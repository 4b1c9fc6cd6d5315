/**
 * One run call on node:http, without a framework: the request, its state, and the few response
 * operations the handlers use (status, headers, a buffered or streamed body), with the semantics they
 * had under Koa — a Buffer or stream body without a Content-Type is `application/octet-stream`, a
 * 204/205/304 sends no body, a stream body is piped (an error cuts the connection).
 * Koa cost more per call than it gave on this path (docs/benchmarks.md, "Koa or node:http").
 */
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Readable } from 'node:stream';
import type { ResolvedApp } from '../shared/contracts/seams.ts';
import { sendsTo } from '../shared/http/upstream-dispatch.ts';
import type { Logger } from '../shared/log.ts';
import type { GatewayState, RunTarget } from './context.ts';
import type { RunMode } from './metrics.ts';

/** Statuses whose responses carry no body (RFC 9110). */
const EMPTY_STATUS = new Set([204, 205, 304]);
const OCTET_STREAM = 'application/octet-stream';
/** The one short content type the handlers name; anything else is set as given. */
const TYPES: Record<string, string> = { 'application/json': 'application/json; charset=utf-8' };

/** The call's state: the request's child logger is built on first use (most calls log only their access line). */
class CallState implements GatewayState {
  requestId: string;
  startedAt: number;
  errorCode?: string;
  errorMessage?: string;
  mode?: RunMode;
  target?: RunTarget;
  app?: ResolvedApp;
  viaDomain?: boolean;
  webhookHost?: string;
  queueDeadline?: number;
  readonly #root: Logger;
  #log: Logger | undefined;

  constructor(requestId: string, startedAt: number, root: Logger) {
    this.requestId = requestId;
    this.startedAt = startedAt;
    this.#root = root;
  }

  get log(): Logger {
    this.#log ??= this.#root.child({ requestId: this.requestId });
    return this.#log;
  }

  set log(l: Logger) {
    this.#log = l;
  }
}

export class CallContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly state: GatewayState;
  /** The request path, as sent (not decoded), and the query string without its `?`. */
  readonly path: string;
  readonly querystring: string;
  #body: Buffer | string | NodeJS.ReadableStream | undefined;

  constructor(
    req: IncomingMessage,
    res: ServerResponse,
    opts: { requestId: string; now: number; log: Logger },
  ) {
    this.req = req;
    this.res = res;
    this.state = new CallState(opts.requestId, opts.now, opts.log);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    // As Koa's ctx.path / ctx.querystring (parseurl): the part before the first '?', and the rest.
    this.path = q === -1 ? url : url.slice(0, q);
    this.querystring = q === -1 ? '' : url.slice(q + 1);
    res.statusCode = 404;
  }

  get method(): string {
    return this.req.method ?? '';
  }

  /** A request header ('' when absent). */
  get(name: string): string {
    const v = this.req.headers[name.toLowerCase()];
    return (Array.isArray(v) ? v.join(', ') : v) ?? '';
  }

  /** The Host header's name part, as Koa's ctx.hostname ('' when absent or malformed). */
  get hostname(): string {
    const host = this.req.headers.host;
    if (!host) return '';
    if (host[0] !== '[') {
      const colon = host.indexOf(':');
      return colon === -1 ? host : host.slice(0, colon);
    }
    try {
      return new URL(`http://${host}`).hostname;
    } catch {
      return '';
    }
  }

  get headerSent(): boolean {
    return this.res.headersSent;
  }

  get status(): number {
    return this.res.statusCode;
  }

  set status(code: number) {
    if (this.res.headersSent) return;
    this.res.statusCode = code;
  }

  set(name: string, value: string | string[]): void {
    if (this.res.headersSent) return;
    this.res.setHeader(name, value);
  }

  remove(name: string): void {
    if (this.res.headersSent) return;
    this.res.removeHeader(name);
  }

  get type(): string {
    return String(this.res.getHeader('content-type') ?? '');
  }

  set type(type: string) {
    this.set('Content-Type', TYPES[type] ?? type);
  }

  set length(n: number) {
    this.set('Content-Length', String(n));
  }

  get body(): Buffer | string | NodeJS.ReadableStream | undefined {
    return this.#body;
  }

  /** A string or Buffer is sent whole with its Content-Length; a stream is piped. */
  set body(value: Buffer | string | NodeJS.ReadableStream) {
    const previous = this.#body;
    if (previous && typeof previous === 'object' && !Buffer.isBuffer(previous) && previous !== value) {
      (previous as Readable).destroy();
    }
    this.#body = value;
    if (typeof value === 'string' || Buffer.isBuffer(value)) {
      if (!this.res.hasHeader('content-type'))
        this.set('Content-Type', typeof value === 'string' ? 'text/plain; charset=utf-8' : OCTET_STREAM);
      this.length = typeof value === 'string' ? Buffer.byteLength(value) : value.length;
    } else {
      if (!this.res.hasHeader('content-type')) this.set('Content-Type', OCTET_STREAM);
      if (previous !== undefined && previous !== value) this.remove('Content-Length');
    }
  }

  /** Sends what the handlers set: the body, or none for a HEAD or a bodiless status. */
  respond(): void {
    const { res } = this;
    const body = this.#body;
    if (res.writableEnded || res.destroyed || res.socket?.writable === false) {
      // The caller went away: nothing to send; a stream body is let go (its replica slot with it).
      if (body && typeof body === 'object' && !Buffer.isBuffer(body)) (body as Readable).destroy();
      if (!res.writableEnded) res.end();
      return;
    }
    if (EMPTY_STATUS.has(res.statusCode)) {
      if (body && typeof body === 'object' && !Buffer.isBuffer(body)) (body as Readable).destroy();
      res.removeHeader('Content-Type');
      res.removeHeader('Content-Length');
      res.removeHeader('Transfer-Encoding');
      res.end();
      return;
    }
    if (body === undefined) {
      const text = STATUS_CODES[res.statusCode] ?? String(res.statusCode);
      this.set('Content-Type', 'text/plain; charset=utf-8');
      this.length = Buffer.byteLength(text);
      res.end(this.method === 'HEAD' ? undefined : text);
      return;
    }
    if (typeof body === 'string' || Buffer.isBuffer(body)) {
      res.end(body);
      return;
    }
    if (this.method === 'HEAD') {
      (body as Readable).destroy();
      res.end();
      return;
    }
    // pipe() and three listeners instead of pipeline(): the same outcome (an error in the body cuts the
    // connection; a caller going away, or an error of the response, lets the body go — and the
    // replica's slot with it) for about half the set-up on the way to the first chunk of a stream.
    // An app's streamed answer skips even the pipe: undici's handler writes each chunk into the response.
    const src = body as Readable;
    src.on('error', () => res.destroy());
    res.on('error', () => src.destroy());
    res.once('close', () => src.destroy());
    if (sendsTo(src)) src.sendTo(res);
    else src.pipe(res);
  }
}
