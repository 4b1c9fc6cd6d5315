/**
 * The dispatcher's settings and their documented defaults (docs/webhooks.md). `parseWebhookSettings`
 * is handed the environment by main.ts; nothing else reads env.
 */
import { z } from 'zod';
import { MAX_RETRY_DELAY_MS } from './retry-policy.ts';
import { parseCidr } from './ssrf.ts';

export interface WebhookSettings {
  /** CIDRs the SSRF guard lets through even though they are internal (local mode: loopback). */
  allowCidrs: string[];
  /** Bound on one attempt (DNS, connect, send, response headers, capped body read). */
  attemptTimeoutMs: number;
  /** Wait between a retryable failure and the next attempt (≤ 5000, the spec's limit). */
  retryDelayMs: number;
  /** Attempts in flight at once per dispatcher. */
  concurrency: number;
  /** At most this much of a receiver's answer is read. */
  maxResponseBytes: number;
  /** How long one pull for new jobs waits on the server before asking again. */
  pullExpiresMs: number;
  /** Pause after NATS errors before pulling again. */
  errorBackoffMs: number;
}

export const DEFAULT_WEBHOOK_SETTINGS: WebhookSettings = {
  allowCidrs: [],
  attemptTimeoutMs: 10_000,
  retryDelayMs: 2_000,
  concurrency: 16,
  maxResponseBytes: 64 * 1024,
  pullExpiresMs: 5_000,
  errorBackoffMs: 1_000,
};

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const EnvSchema = z.object({
  APPHOST_WEBHOOK_ALLOW_CIDRS: z
    .string()
    .default('')
    .transform((s, ctx) => {
      const list = s
        .split(',')
        .map((c) => c.trim())
        .filter((c) => c !== '');
      for (const c of list) {
        try {
          parseCidr(c);
        } catch (err) {
          ctx.addIssue({ code: 'custom', message: (err as Error).message });
        }
      }
      return list;
    }),
  APPHOST_WEBHOOK_ATTEMPT_TIMEOUT_MS: int(100, 120_000).default(DEFAULT_WEBHOOK_SETTINGS.attemptTimeoutMs),
  APPHOST_WEBHOOK_RETRY_DELAY_MS: int(0, MAX_RETRY_DELAY_MS).default(DEFAULT_WEBHOOK_SETTINGS.retryDelayMs),
  APPHOST_WEBHOOK_CONCURRENCY: int(1, 1_000).default(DEFAULT_WEBHOOK_SETTINGS.concurrency),
  APPHOST_WEBHOOK_MAX_RESPONSE_BYTES: int(0, 16 * 1024 * 1024).default(
    DEFAULT_WEBHOOK_SETTINGS.maxResponseBytes,
  ),
  APPHOST_WEBHOOK_PULL_EXPIRES_MS: int(1_000, 60_000).default(DEFAULT_WEBHOOK_SETTINGS.pullExpiresMs),
});

export function parseWebhookSettings(env: NodeJS.ProcessEnv): WebhookSettings {
  const e = EnvSchema.parse(env);
  return {
    allowCidrs: e.APPHOST_WEBHOOK_ALLOW_CIDRS,
    attemptTimeoutMs: e.APPHOST_WEBHOOK_ATTEMPT_TIMEOUT_MS,
    retryDelayMs: e.APPHOST_WEBHOOK_RETRY_DELAY_MS,
    concurrency: e.APPHOST_WEBHOOK_CONCURRENCY,
    maxResponseBytes: e.APPHOST_WEBHOOK_MAX_RESPONSE_BYTES,
    pullExpiresMs: e.APPHOST_WEBHOOK_PULL_EXPIRES_MS,
    errorBackoffMs: DEFAULT_WEBHOOK_SETTINGS.errorBackoffMs,
  };
}
