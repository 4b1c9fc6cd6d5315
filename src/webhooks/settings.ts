/**
 * The dispatcher's settings and their documented defaults (docs/webhooks.md). main.ts hands the
 * environment to `readWebhooksEnv`; nothing else reads env.
 */
import { z } from 'zod';
import { natsReplicas } from '../shared/nats/replicas.ts';
import { commonEnv, int, readEnv, text } from '../shared/settings.ts';
import { MAX_RETRY_DELAY_MS } from './retry-policy.ts';
import { parseCidr } from './ssrf.ts';

export interface WebhookSettings {
  /** CIDRs the SSRF guard lets through even though they are internal (local mode: loopback). */
  allowCidrs: string[];
  /** Bound on one attempt (DNS, connect, send, response headers, capped body read). */
  attemptTimeoutMs: number;
  /** Wait between a retryable failure and the next attempt (≤ 5000, the spec's limit). */
  retryDelayMs: number;
  /**
   * Attempts in flight at once per dispatcher. 64: jobs then come in larger pulls and their record writes
   * share socket writes, so a delivery costs about a quarter less dispatcher and 40% less NATS CPU than with 16
   * (docs/benchmarks.md); each attempt holds its job (at most ~1 MiB), its request body and a connection.
   */
  concurrency: number;
  /** At most this much of a receiver's answer is read. */
  maxResponseBytes: number;
  /** How long one pull for new jobs waits on the server before asking again. */
  pullExpiresMs: number;
  /** Pause after NATS errors before pulling again; the first pause before a job whose record failed is retried. */
  errorBackoffMs: number;
  /** Longest pause before a job whose delivery record could not be read or written is handed out again. */
  recordRetryMaxDelayMs: number;
  /** Such a job is given up once it has been queued this long (its record never became writable). */
  recordGiveUpMs: number;
}

export const DEFAULT_WEBHOOK_SETTINGS: WebhookSettings = {
  allowCidrs: [],
  attemptTimeoutMs: 10_000,
  retryDelayMs: 2_000,
  concurrency: 64,
  maxResponseBytes: 64 * 1024,
  pullExpiresMs: 5_000,
  errorBackoffMs: 1_000,
  recordRetryMaxDelayMs: 30_000,
  recordGiveUpMs: 24 * 3_600_000,
};

const D = DEFAULT_WEBHOOK_SETTINGS;

/** The dispatcher's tunables (docs/webhooks.md). */
export const WebhookSettingsEnv = z.object({
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
  APPHOST_WEBHOOK_ATTEMPT_TIMEOUT_MS: int(D.attemptTimeoutMs, { min: 100, max: 120_000 }),
  APPHOST_WEBHOOK_RETRY_DELAY_MS: int(D.retryDelayMs, { max: MAX_RETRY_DELAY_MS }),
  APPHOST_WEBHOOK_CONCURRENCY: int(D.concurrency, { min: 1, max: 1_000 }),
  APPHOST_WEBHOOK_MAX_RESPONSE_BYTES: int(D.maxResponseBytes, { max: 16 * 1024 * 1024 }),
  APPHOST_WEBHOOK_PULL_EXPIRES_MS: int(D.pullExpiresMs, { min: 1_000, max: 60_000 }),
  APPHOST_WEBHOOK_RECORD_RETRY_MAX_DELAY_MS: int(D.recordRetryMaxDelayMs, { min: 1_000, max: 600_000 }),
  APPHOST_WEBHOOK_RECORD_GIVE_UP_MS: int(D.recordGiveUpMs, { min: 60_000 }),
});

/** Every variable `apphost webhooks` reads. */
export const WebhooksEnv = WebhookSettingsEnv.extend({
  ...commonEnv,
  NATS_URL: text('nats://127.0.0.1:4222'),
  /** `auto` (min(3, NATS cluster size)) or 1..5: copies of WEBHOOKS and the deliveries bucket. */
  APPHOST_NATS_REPLICAS: natsReplicas(),
  APPHOST_PLATFORM_KEY: z
    .string({ error: 'is required (the platform key that seals webhook secrets)' })
    .min(16, 'must be at least 16 characters'),
  /** Bound on start-up: connecting to NATS and creating the stream. */
  APPHOST_WEBHOOK_STARTUP_TIMEOUT_MS: int(30_000, { min: 1_000 }),
  /** Bound on SIGTERM: in-flight attempts get this long to finish (then JetStream redelivers them). */
  APPHOST_WEBHOOK_STOP_BOUND_MS: int(20_000),
});

/** What the dispatcher allows itself after SIGTERM, in total (the chart derives the pod's grace from it). */
export const webhooksShutdownBoundMs = (e: { APPHOST_WEBHOOK_STOP_BOUND_MS: number }) =>
  e.APPHOST_WEBHOOK_STOP_BOUND_MS + 5_000;

export type WebhooksEnv = z.output<typeof WebhooksEnv>;

export function readWebhooksEnv(env: NodeJS.ProcessEnv): WebhooksEnv {
  return readEnv('webhooks', WebhooksEnv, env);
}

export function parseWebhookSettings(env: NodeJS.ProcessEnv): WebhookSettings {
  return webhookSettings(readEnv('webhooks', WebhookSettingsEnv, env));
}

export function webhookSettings(e: z.output<typeof WebhookSettingsEnv>): WebhookSettings {
  return {
    allowCidrs: e.APPHOST_WEBHOOK_ALLOW_CIDRS,
    attemptTimeoutMs: e.APPHOST_WEBHOOK_ATTEMPT_TIMEOUT_MS,
    retryDelayMs: e.APPHOST_WEBHOOK_RETRY_DELAY_MS,
    concurrency: e.APPHOST_WEBHOOK_CONCURRENCY,
    maxResponseBytes: e.APPHOST_WEBHOOK_MAX_RESPONSE_BYTES,
    pullExpiresMs: e.APPHOST_WEBHOOK_PULL_EXPIRES_MS,
    errorBackoffMs: DEFAULT_WEBHOOK_SETTINGS.errorBackoffMs,
    recordRetryMaxDelayMs: e.APPHOST_WEBHOOK_RECORD_RETRY_MAX_DELAY_MS,
    recordGiveUpMs: e.APPHOST_WEBHOOK_RECORD_GIVE_UP_MS,
  };
}
