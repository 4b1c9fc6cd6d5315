/**
 * The producer side of webhook delivery, used by the gateway and the run worker: validate the
 * caller's `webhookEndpoint` before anything is accepted, build the delivery job of a finished call,
 * and enqueue it.
 */
import { type WebhookJob, type WebhookTarget, webhookSubject } from '../shared/contracts/messaging.ts';
import { ApiError, ErrorCode } from '../shared/errors.ts';
import { publishIdempotent } from '../shared/jetstream-publish.ts';
import type { JetStreamPublisher } from '../shared/nats/ack-inbox.ts';

/** Longest `webhookEndpoint` accepted. */
export const MAX_WEBHOOK_URL_LENGTH = 2048;

/**
 * Parses the (already URL-decoded) `webhookEndpoint` query value. Only absolute http(s) URLs without
 * credentials are accepted; anything else is a 400 before the run is accepted.
 */
export function parseWebhookEndpoint(raw: string): URL {
  const fail = (why: string) =>
    new ApiError(ErrorCode.InvalidWebhookEndpoint, `webhookEndpoint ${why}`, {
      details: { parameter: 'webhookEndpoint' },
    });
  if (raw.trim() === '') throw fail('is empty');
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) throw fail(`is longer than ${MAX_WEBHOOK_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw fail('is not an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw fail('must use http or https');
  if (url.username || url.password) throw fail('must not contain credentials');
  if (!url.hostname) throw fail('has no host');
  return url;
}

export const webhookMsgId = (requestId: string) => `webhook-${requestId}`;

/** Publishes a delivery job; resolves once JetStream has stored it (a retried publish is de-duplicated). */
export async function publishWebhookJob(
  js: JetStreamPublisher,
  job: WebhookJob,
  timeoutMs = 5_000,
): Promise<void> {
  await publishIdempotent(js, webhookSubject(job.projectId, job.appName), JSON.stringify(job), {
    msgID: webhookMsgId(job.requestId),
    timeoutMs,
  });
}

/** The WEBHOOKS job for a finished call (sync or async), from what the app answered. */
export function makeWebhookJob(opts: {
  requestId: string;
  projectId: string;
  appName: string;
  target: WebhookTarget;
  status: number;
  contentType?: string | undefined;
  body: Buffer;
  runStatus: WebhookJob['runStatus'];
  completedAt: Date;
}): WebhookJob {
  return {
    v: 1,
    requestId: opts.requestId,
    projectId: opts.projectId,
    appName: opts.appName,
    target: opts.target,
    response: {
      status: opts.status,
      ...(opts.contentType ? { contentType: opts.contentType } : {}),
      bodyBase64: opts.body.toString('base64'),
    },
    runStatus: opts.runStatus,
    completedAt: opts.completedAt.toISOString(),
  };
}
