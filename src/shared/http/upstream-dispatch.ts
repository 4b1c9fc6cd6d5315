/**
 * One call to an app on undici's dispatch API, for the balancer's AppCaller. An answer small enough
 * (`wholeUpTo`, by its Content-Length; never an event stream) is collected whole before the promise
 * settles: no body stream, no request-API handler and no promise over the body per call, which is how
 * most sync calls end (docs/benchmarks.md, "undici's dispatch API"). Any other answer comes as a
 * stream, with undici's back-pressure. Failures map as `callUpstream`'s (refused → 502, too slow → 504).
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

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#chunks) this.#chunks.push(chunk);
    else if (this.#body && !this.#body.push(chunk)) controller.pause();
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
class AnswerBody extends Readable {
  readonly #controller: Dispatcher.DispatchController;
  #over = false;

  constructor(controller: Dispatcher.DispatchController) {
    super();
    this.#controller = controller;
  }

  override _read(): void {
    this.#controller.resume();
  }

  /** The answer is complete. */
  complete(): void {
    this.#over = true;
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
