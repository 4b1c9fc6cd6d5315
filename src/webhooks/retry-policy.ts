/**
 * The spec's retry table (service-interface §6.2) as pure functions: what an attempt's outcome means,
 * and what to do next. Nothing here touches the network or NATS.
 */
import type { WebhookAttemptOutcome } from '../shared/contracts/messaging.ts';

/** At most this many attempts per delivery, in total (spec §6.2). */
export const MAX_ATTEMPTS = 3;
/** The spec allows at most this long between two attempts. */
export const MAX_RETRY_DELAY_MS = 5_000;

/**
 * Outcome of a receiver's HTTP status: 2xx succeeds; 404 and every non-2xx outside 4xx/5xx (1xx, 3xx —
 * redirects are never followed) are retried; any other 4xx and every 5xx are permanent (a 5xx may have
 * had side effects, so it is not repeated).
 */
export function classifyStatus(status: number): 'success' | 'http_retryable' | 'http_permanent' {
  if (status >= 200 && status <= 299) return 'success';
  if (status === 404) return 'http_retryable';
  if (status >= 400 && status <= 599) return 'http_permanent';
  return 'http_retryable';
}

export function isRetryable(outcome: WebhookAttemptOutcome): boolean {
  return outcome === 'http_retryable' || outcome === 'network_error' || outcome === 'timeout';
}

export type NextStep =
  | { action: 'delivered' }
  | { action: 'retry'; delayMs: number }
  | { action: 'failed'; reason: 'permanent' | 'attempts_exhausted' };

/** What to do after attempt number `attempt` (1-based) ended with `outcome`. */
export function nextStep(
  outcome: WebhookAttemptOutcome,
  attempt: number,
  opts: { maxAttempts?: number; retryDelayMs: number },
): NextStep {
  const maxAttempts = opts.maxAttempts ?? MAX_ATTEMPTS;
  if (outcome === 'success') return { action: 'delivered' };
  if (!isRetryable(outcome)) return { action: 'failed', reason: 'permanent' };
  if (attempt >= maxAttempts) return { action: 'failed', reason: 'attempts_exhausted' };
  return { action: 'retry', delayMs: Math.min(Math.max(0, opts.retryDelayMs), MAX_RETRY_DELAY_MS) };
}
