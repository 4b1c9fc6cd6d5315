/**
 * One delivery attempt over HTTP: SSRF check, POST to the checked address, bounded in time and in
 * how much of the answer is read. Never follows redirects (a 3xx is just an outcome).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher, Agent as UndiciAgent } from 'undici';
import type { WebhookAttemptOutcome } from '../shared/contracts/messaging.ts';
import { Agent } from '../shared/http/undici-agent.ts';
import { classifyStatus } from './retry-policy.ts';
import type { DeliveryRequest } from './signing.ts';
import { errorText, type GuardVerdict, pinnedLookup, type SsrfGuard } from './ssrf.ts';

export interface AttemptResult {
  outcome: WebhookAttemptOutcome;
  status?: number;
  error?: string;
}

export interface DeliveryTransport {
  send(url: URL, req: DeliveryRequest): Promise<AttemptResult>;
  /** Closes kept-alive connections (after the last attempt). */
  close?(): Promise<void>;
}

/**
 * Checked addresses whose connections are kept alive at once. Beyond it the least recently used
 * address's pool is closed (its attempts in flight finish first).
 */
export const PINNED_POOLS_MAX = 256;

export function createHttpTransport(opts: {
  guard: SsrfGuard;
  /** Bound on a whole attempt: DNS, connect, request, response headers and the (capped) body read. */
  attemptTimeoutMs: number;
  /** At most this much of a receiver's answer is read; the rest is discarded. */
  maxResponseBytes: number;
}): DeliveryTransport {
  // One connection pool per checked address, every connection of it pinned to that address: a
  // connection is only ever reused for an attempt whose own check gave the same address, so no second
  // (rebinding) DNS answer is used and no connection goes to an unchecked address. Kept-alive
  // connections save a TCP (and TLS) handshake per delivery to a busy receiver.
  const pools = new Map<string, UndiciAgent>();
  const poolFor = (address: string, family: 4 | 6): UndiciAgent => {
    const key = `${family}/${address}`;
    let agent = pools.get(key);
    if (agent) {
      pools.delete(key); // re-inserted below: Map order = least recently used first
    } else {
      agent = new Agent({
        connect: { lookup: pinnedLookup(address, family), timeout: opts.attemptTimeoutMs },
        headersTimeout: opts.attemptTimeoutMs,
        bodyTimeout: opts.attemptTimeoutMs,
      });
      if (pools.size >= PINNED_POOLS_MAX) {
        const [oldestKey, oldest] = pools.entries().next().value as [string, UndiciAgent];
        pools.delete(oldestKey);
        oldest.close().catch(() => {});
      }
    }
    pools.set(key, agent);
    return agent;
  };
  return {
    async close() {
      const all = [...pools.values()];
      pools.clear();
      await Promise.all(all.map((a) => a.close().catch(() => {})));
    },
    send(url, req) {
      return new Promise<AttemptResult>((resolve) => {
        const attempt = new Attempt(opts.maxResponseBytes, opts.attemptTimeoutMs, resolve);
        const checked = (verdict: GuardVerdict) => {
          if (attempt.settled) return;
          if (!verdict.ok) {
            attempt.settle({
              outcome: verdict.retryable ? 'network_error' : 'refused_by_policy',
              error: verdict.reason,
            });
            return;
          }
          try {
            // SNI and Host stay the name; the connection goes to the checked address.
            poolFor(verdict.address, verdict.family).dispatch(
              {
                origin: url.origin,
                path: url.pathname + url.search,
                method: 'POST',
                headers: req.headers,
                body: req.body,
              },
              attempt,
            );
          } catch (err) {
            attempt.fail(err);
          }
        };
        opts.guard.check(url).then(checked, (err: unknown) => attempt.fail(err));
      });
    },
  };
}

/**
 * One attempt on undici's dispatch API: the answer's status, its body counted and dropped (cut off past
 * the limit), one timer bounding everything from the SSRF check to the body's end. No request-API
 * handler, body stream or AbortController per attempt (docs/benchmarks.md, "The webhook dispatcher's
 * CPU per delivery").
 */
class Attempt implements Dispatcher.DispatchHandler {
  settled = false;
  readonly #limit: number;
  readonly #timeoutMs: number;
  readonly #resolve: (r: AttemptResult) => void;
  readonly #timer: NodeJS.Timeout;
  #controller: Dispatcher.DispatchController | undefined;
  #timedOut = false;
  #status: number | undefined;
  #read = 0;

  constructor(limit: number, timeoutMs: number, resolve: (r: AttemptResult) => void) {
    this.#limit = limit;
    this.#timeoutMs = timeoutMs;
    this.#resolve = resolve;
    this.#timer = setTimeout(() => this.#timeout(), timeoutMs);
  }

  settle(r: AttemptResult): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.#timer);
    this.#resolve(r);
  }

  fail(err: unknown): void {
    const code = (err as { code?: unknown }).code;
    if (this.#timedOut || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT')
      this.settle(this.#timeoutResult());
    else this.settle({ outcome: 'network_error', error: errorText(err) });
  }

  #timeoutResult(): AttemptResult {
    return { outcome: 'timeout', error: `no complete answer within ${this.#timeoutMs} ms` };
  }

  #timeout(): void {
    this.#timedOut = true;
    // Before the head: a timeout. After it, the status is known and stands (the body is only cut off).
    if (this.#status === undefined) this.settle(this.#timeoutResult());
    this.#controller?.abort(new Error('attempt timeout'));
  }

  #done(): void {
    const status = this.#status as number;
    this.settle({ outcome: classifyStatus(status), status });
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#timedOut) controller.abort(new Error('attempt timeout'));
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (statusCode < 200) return; // 1xx: the answer is still to come
    this.#status = statusCode;
    const length = Number(headers['content-length']);
    // The status is known; a receiver announcing or sending more than the limit is simply cut off.
    if (length > this.#limit) {
      this.#done();
      controller.abort(new Error('answer over the read limit'));
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#read += chunk.length;
    if (this.#read > this.#limit && !this.settled) {
      this.#done();
      controller.abort(new Error('answer over the read limit'));
    }
  }

  onResponseEnd(): void {
    this.#done();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.#status !== undefined) this.#done();
    else this.fail(err);
  }
}
