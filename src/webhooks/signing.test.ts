import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { WebhookJob } from '../shared/contracts/messaging.ts';
import { buildDeliveryRequest, signDelivery } from './signing.ts';

const job = (body: string): WebhookJob => ({
  v: 1,
  requestId: 'req-123',
  projectId: 'p',
  appName: 'a',
  target: { endpoint: 'https://example.com/hook' },
  response: {
    status: 200,
    contentType: 'application/json',
    bodyBase64: Buffer.from(body).toString('base64'),
  },
  runStatus: 'success',
  completedAt: '2026-01-01T00:00:00.000Z',
});

describe('signing', () => {
  it('matches a known HMAC-SHA256 vector', () => {
    // echo -n 'req-1.1700000000.{}' | openssl dgst -sha256 -hmac s3cret
    const want = createHmac('sha256', 's3cret').update('req-1.1700000000.{}').digest('hex');
    expect(signDelivery('s3cret', 'req-1', 1700000000, '{}')).toBe(want);
    expect(want).toMatch(/^[0-9a-f]{64}$/);
  });

  it('unsigned: the body is the function response byte for byte', () => {
    const raw = '{"b": 1,  "a":"é"}\n';
    const r = buildDeliveryRequest(job(raw), undefined, 1700000000);
    expect(r.body.toString('utf8')).toBe(raw);
    expect(r.headers['x-request-id']).toBe('req-123');
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['x-service-webhook-signature']).toBeUndefined();
  });

  it('signed: the envelope carries run_id, status, response, response_status and timestamp', () => {
    const r = buildDeliveryRequest(job('{"answer":42}'), 'k', 1700000123);
    expect(JSON.parse(r.body.toString())).toEqual({
      run_id: 'req-123',
      status: 'success',
      response: { answer: 42 },
      response_status: 200,
      timestamp: 1700000123,
    });
    expect(r.headers['x-service-webhook-timestamp']).toBe('1700000123');
    const sig = createHmac('sha256', 'k').update(`req-123.1700000123.${r.body.toString()}`).digest('hex');
    expect(r.headers['x-service-webhook-signature']).toBe(`v1,${sig}`);
  });

  it('signed: a non-JSON response is forwarded as a string', () => {
    const r = buildDeliveryRequest(job('plain text'), 'k', 1);
    expect(JSON.parse(r.body.toString()).response).toBe('plain text');
  });
});
