/**
 * What a delivery carries: the body (raw function response, or the signed envelope) and the headers
 * of service-interface §6.3. Pure: the timestamp and secret come in as arguments.
 */
import { createHmac } from 'node:crypto';
import type { WebhookJob } from '../shared/contracts/messaging.ts';

export const USER_AGENT = 'apphost-webhooks/0.1';
export const SIGNATURE_HEADER = 'X-Service-Webhook-Signature';
export const TIMESTAMP_HEADER = 'X-Service-Webhook-Timestamp';

/** Lowercase hex HMAC-SHA256, keyed with the secret, of `<request_id>.<timestamp>.<body>` (UTF-8). */
export function signDelivery(secret: string, requestId: string, timestamp: number, body: string): string {
  return createHmac('sha256', secret).update(`${requestId}.${timestamp}.${body}`, 'utf8').digest('hex');
}

/** The signed body. Member names are part of the public contract (docs/webhooks.md). */
export interface WebhookEnvelope {
  run_id: string;
  /** The run's status: success, failure or timeout. */
  status: WebhookJob['runStatus'];
  /** The function's response: its JSON value, or the body as a string when it was not JSON. */
  response: unknown;
  /** The HTTP status the function answered with. */
  response_status: number;
  /** Unix seconds at sending; equals the X-Service-Webhook-Timestamp header. */
  timestamp: number;
}

export function makeEnvelope(job: WebhookJob, timestamp: number): WebhookEnvelope {
  const text = Buffer.from(job.response.bodyBase64, 'base64').toString('utf8');
  let response: unknown = text;
  try {
    if (text.trim() !== '') response = JSON.parse(text);
  } catch {
    // not JSON: forwarded as a string
  }
  return {
    run_id: job.requestId,
    status: job.runStatus,
    response,
    response_status: job.response.status,
    timestamp,
  };
}

export interface DeliveryRequest {
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * Builds one attempt's request. `secret` undefined: unsigned, the function's body byte for byte.
 * Otherwise the envelope, signed with `nowSeconds` (each attempt signs afresh).
 */
export function buildDeliveryRequest(
  job: WebhookJob,
  secret: string | undefined,
  nowSeconds: number,
): DeliveryRequest {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    'x-request-id': job.requestId,
  };
  if (secret === undefined) return { headers, body: Buffer.from(job.response.bodyBase64, 'base64') };
  const body = JSON.stringify(makeEnvelope(job, nowSeconds));
  headers[TIMESTAMP_HEADER.toLowerCase()] = String(nowSeconds);
  headers[SIGNATURE_HEADER.toLowerCase()] = `v1,${signDelivery(secret, job.requestId, nowSeconds, body)}`;
  return { headers, body: Buffer.from(body, 'utf8') };
}
