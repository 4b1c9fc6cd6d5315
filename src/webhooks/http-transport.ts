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
  const pools = new Map<string, Agent>();
  const poolFor = (address: string, family: 4 | 6): Agent => {
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
        const [oldestKey, oldest] = pools.entries().next().value as [string, Agent];
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
    async send(url, req) {
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(new Error('attempt timeout')), opts.attemptTimeoutMs);
      const timedOut = (): AttemptResult => ({
        outcome: 'timeout',
        error: `no complete answer within ${opts.attemptTimeoutMs} ms`,
      });
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
        // SNI and Host stay the name; the connection goes to the checked address.
        const res = await request(url, {
          method: 'POST',
          headers: req.headers,
          body: req.body,
          dispatcher: poolFor(verdict.address, verdict.family),
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
      }
    },
  };
}
