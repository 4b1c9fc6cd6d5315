/**
 * One delivery attempt over HTTP: SSRF check, POST to the checked address, bounded in time and in
 * how much of the answer is read. Never follows redirects (a 3xx is just an outcome).
 */
import { Agent, request } from 'undici';
import type { WebhookAttemptOutcome } from '../shared/contracts/messaging.ts';
import { classifyStatus } from './retry-policy.ts';
import type { DeliveryRequest } from './signing.ts';
import { errorText, pinnedLookup, type SsrfGuard } from './ssrf.ts';

export interface AttemptResult {
  outcome: WebhookAttemptOutcome;
  status?: number;
  error?: string;
}

export interface DeliveryTransport {
  send(url: URL, req: DeliveryRequest): Promise<AttemptResult>;
}

export function createHttpTransport(opts: {
  guard: SsrfGuard;
  /** Bound on a whole attempt: DNS, connect, request, response headers and the (capped) body read. */
  attemptTimeoutMs: number;
  /** At most this much of a receiver's answer is read; the rest is discarded. */
  maxResponseBytes: number;
}): DeliveryTransport {
  return {
    async send(url, req) {
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(new Error('attempt timeout')), opts.attemptTimeoutMs);
      const timedOut = (): AttemptResult => ({
        outcome: 'timeout',
        error: `no complete answer within ${opts.attemptTimeoutMs} ms`,
      });
      let agent: Agent | undefined;
      try {
        const verdict = await Promise.race([
          opts.guard.check(url),
          new Promise<never>((_, reject) =>
            abort.signal.addEventListener('abort', () => reject(abort.signal.reason), { once: true }),
          ),
        ]);
        if (!verdict.ok)
          return {
            outcome: verdict.retryable ? 'network_error' : 'refused_by_policy',
            error: verdict.reason,
          };
        // A fresh agent per attempt, pinned to the checked address: no pooled connection to some
        // other address, and no second DNS answer (rebinding) is ever used. SNI and Host stay the name.
        agent = new Agent({
          connect: { lookup: pinnedLookup(verdict.address, verdict.family), timeout: opts.attemptTimeoutMs },
          headersTimeout: opts.attemptTimeoutMs,
          bodyTimeout: opts.attemptTimeoutMs,
        });
        const res = await request(url, {
          method: 'POST',
          headers: req.headers,
          body: req.body,
          dispatcher: agent,
          signal: abort.signal,
        });
        try {
          await res.body.dump({ limit: opts.maxResponseBytes, signal: abort.signal });
        } catch {
          // The status is already known; a receiver that keeps talking is simply cut off.
        }
        return { outcome: classifyStatus(res.statusCode), status: res.statusCode };
      } catch (err) {
        if (abort.signal.aborted) return timedOut();
        const code = (err as { code?: unknown }).code;
        if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return timedOut();
        return { outcome: 'network_error', error: errorText(err) };
      } finally {
        clearTimeout(timer);
        agent?.destroy().catch(() => {});
      }
    },
  };
}
