import { describe, expect, it } from 'vitest';
import { DEFAULT_WEBHOOK_SETTINGS, parseWebhookSettings } from './settings.ts';

describe('parseWebhookSettings', () => {
  it('has documented defaults', () => {
    expect(parseWebhookSettings({})).toEqual(DEFAULT_WEBHOOK_SETTINGS);
    expect(DEFAULT_WEBHOOK_SETTINGS.retryDelayMs).toBeLessThanOrEqual(5_000);
  });

  it('reads every setting', () => {
    const s = parseWebhookSettings({
      APPHOST_WEBHOOK_ALLOW_CIDRS: ' 127.0.0.0/8, ::1/128 ,',
      APPHOST_WEBHOOK_ATTEMPT_TIMEOUT_MS: '2500',
      APPHOST_WEBHOOK_RETRY_DELAY_MS: '5000',
      APPHOST_WEBHOOK_CONCURRENCY: '3',
      APPHOST_WEBHOOK_MAX_RESPONSE_BYTES: '1024',
      APPHOST_WEBHOOK_PULL_EXPIRES_MS: '1000',
    });
    expect(s).toMatchObject({
      allowCidrs: ['127.0.0.0/8', '::1/128'],
      attemptTimeoutMs: 2500,
      retryDelayMs: 5000,
      concurrency: 3,
      maxResponseBytes: 1024,
      pullExpiresMs: 1000,
    });
  });

  it.each([
    ['APPHOST_WEBHOOK_RETRY_DELAY_MS', '5001'],
    ['APPHOST_WEBHOOK_RETRY_DELAY_MS', '-1'],
    ['APPHOST_WEBHOOK_CONCURRENCY', '0'],
    ['APPHOST_WEBHOOK_ATTEMPT_TIMEOUT_MS', 'soon'],
    ['APPHOST_WEBHOOK_ALLOW_CIDRS', '10.0.0.0/8,not-a-cidr'],
  ])('rejects %s=%s', (name, value) => {
    expect(() => parseWebhookSettings({ [name]: value })).toThrow();
  });
});
