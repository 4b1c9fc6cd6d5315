/**
 * One call to an app on undici's dispatch API, for the balancer's AppCaller. An answer small enough
 * (`wholeUpTo`, by its Content-Length; never an event stream) is collected whole before the promise
 * settles: no body stream, no request-API handler and no promise over the body per call, which is how
 * most sync calls end (docs/benchmarks.md, "undici's dispatch API"). Any other answer comes as a
 * stream, with undici's back-pressure; the gateway has it written straight into the caller's response
 * (`sendsTo`). Failures map as `callUpstream`'s (refused → 502, too slow → 504).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { AppResponse, CallSignal } from '../contracts/seams.ts';
import { errors } from './undici-agent.ts';
import { isEventStream, type UpstreamCall, upstreamError, upstreamRequest } from './upstream.ts';

export interface DispatchCall extends Omit<UpstreamCall, 'signal'> {
  /** Cancels the call (an AbortSignal or a cheaper CallAbort). */
  signal?: CallSignal;
  /** Answers with a Content-Length up to this many bytes are read whole (`AppResponse.whole`). */
  wholeUpTo?: number;
}

/** Where a streamed answer can be written straight to: the caller's response (a node:http ServerResponse). */
export interface BodySink {
  write(chunk: Buffer): boolean;
  end(): unknown;
  destroy(): unknown;
  once(event: 'drain', listener: () => void): unknown;
  readonly destroyed: boolean;
}

/**
 * A streamed answer that can skip its stream: `sendTo(sink)` writes what it holds, then each chunk
 * from undici's handler as it is parsed, and ends the sink with the answer (in the same turn as its
 * last chunk when they come together: one write). The connection pauses while the sink is full and
 * resumes on its 'drain'. The Readable itself still ends and closes with the answer (the replica's slot
 * and the caller's signal go with its 'close'); destroying it aborts the call as before, and a failed
 * answer errors it (the caller of sendTo cuts the sink on that error, as with a pipe).
 */
export interface SendsTo {
  sendTo(sink: BodySink): void;
}

export function sendsTo(body: unknown): body is NodeJS.ReadableStream & SendsTo {
  return body instanceof AnswerBody;
}

export function dispatchUpstream(call: DispatchCall): Promise<AppResponse> {
  return new Promise((resolve, reject) => {
    const handler = new AnswerHandler(call, resolve, reject);
    call.dispatcher.dispatch(upstreamRequest(call), handler);
  });
}

/** Whether an answer with these headers is read whole under `wholeUpTo`. */
export function readsWhole(headers: IncomingHttpHeaders, wholeUpTo: number | undefined): boolean {
  if (wholeUpTo === undefined) return false;
  const length = first(headers['content-length']);
  if (length === undefined || !/^\d+$/.test(length) || Number(length) > wholeUpTo) return false;
  return !isEventStream(first(headers['content-type']));
}

function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

class AnswerHandler implements Dispatcher.DispatchHandler {
  readonly #call: DispatchCall;
  readonly #resolve: (res: AppResponse) => void;
  readonly #reject: (err: unknown) => void;
  #onAbort: (() => void) | undefined;
  #head: { statusCode: number; headers: IncomingHttpHeaders } | undefined;
  #chunks: Buffer[] | undefined;
  #body: AnswerBody | undefined;

  constructor(call: DispatchCall, resolve: (res: AppResponse) => void, reject: (err: unknown) => void) {
    this.#call = call;
    this.#resolve = resolve;
    this.#reject = reject;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    const { signal } = this.#call;
    if (!signal) return;
    // Aborting goes through undici, which then calls onResponseError with the reason (any value, as
    // undici's request API takes it from an AbortSignal).
    const abort = () => controller.abort((signal.reason ?? new errors.RequestAbortedError()) as Error);
    if (signal.aborted) {
      abort();
      return;
    }
    this.#onAbort = abort;
    signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (statusCode < 200) return; // 1xx: the answer is still to come
    if (readsWhole(headers, this.#call.wholeUpTo)) {
      this.#head = { statusCode, headers };
      this.#chunks = [];
      return;
    }
    const body = new AnswerBody(controller);
    this.#body = body;
    // Until the body is over, the caller's signal still aborts the call (and so the stream).
    body.once('close', () => this.#forgetSignal());
    this.#resolve({ statusCode, headers, body });
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#chunks) this.#chunks.push(chunk);
    else this.#body?.add(chunk);
  }

  onResponseEnd(): void {
    if (this.#chunks && this.#head) {
      this.#forgetSignal();
      const chunks = this.#chunks;
      const whole = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
      this.#resolve({ ...this.#head, whole });
      return;
    }
    this.#body?.complete();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    const body = this.#body;
    if (body) {
      body.fail(err);
      return;
    }
    this.#forgetSignal();
    this.#reject(upstreamError(err, this.#call.signal));
  }

  #forgetSignal(): void {
    if (this.#onAbort) this.#call.signal?.removeEventListener('abort', this.#onAbort);
    this.#onAbort = undefined;
  }
}

/** A streamed answer: reading resumes the connection; destroying it before its end aborts the call. */
class AnswerBody extends Readable implements SendsTo {
  readonly #controller: Dispatcher.DispatchController;
  #over = false;
  #complete = false;
  #sink: BodySink | undefined;
  #waiting = false;

  constructor(controller: Dispatcher.DispatchController) {
    super();
    this.#controller = controller;
  }

  /** A chunk of the answer: to the sink once there is one, else into the stream's buffer. */
  add(chunk: Buffer): void {
    const sink = this.#sink;
    if (!sink) {
      if (!this.push(chunk)) this.#controller.pause();
    } else if (!sink.destroyed && !sink.write(chunk)) this.#wait(sink);
  }

  sendTo(sink: BodySink): void {
    if (this.destroyed) {
      // The answer failed (or was let go) before the caller's response was ready: cut it, as a pipe's error would.
      sink.destroy();
      return;
    }
    this.#sink = sink;
    // What came before the sink (the head and a first event can arrive in one read) goes first.
    const held = this.readableLength > 0 ? (this.read() as Buffer | null) : null;
    if (held && !sink.write(held)) this.#wait(sink);
    else this.#controller.resume();
    if (this.#complete) sink.end();
    // Flowing with nothing to hand out: the stream ends, then closes, when the answer does.
    this.resume();
  }

  #wait(sink: BodySink): void {
    if (this.#waiting) return;
    this.#waiting = true;
    this.#controller.pause();
    sink.once('drain', () => {
      this.#waiting = false;
      if (!this.#over) this.#controller.resume();
    });
  }

  override _read(): void {
    // With a sink, only its 'drain' resumes the connection.
    if (!this.#sink) this.#controller.resume();
  }

  /** The answer is complete. */
  complete(): void {
    this.#over = true;
    this.#complete = true;
    // With the last chunk's write, when both came in one read: node corks a response's writes for the turn.
    this.#sink?.end();
    this.push(null);
  }

  /** The call failed after its head (the body timed out, the connection broke, the signal aborted it). */
  fail(err: Error): void {
    this.#over = true;
    // As undici's own body: after the chunks already queued for this turn.
    queueMicrotask(() => this.destroy(err));
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    if (!this.#over) {
      this.#over = true;
      this.#controller.abort(err ?? new errors.RequestAbortedError());
    }
    cb(err);
  }
}
