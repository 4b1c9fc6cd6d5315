import { describe, expect, it } from 'vitest';
import type { WebhookAttemptOutcome } from '../shared/contracts/messaging.ts';
import { classifyStatus, nextStep } from './retry-policy.ts';

describe('classifyStatus (spec §6.2 table)', () => {
  it.each([
    [200, 'success'],
    [201, 'success'],
    [204, 'success'],
    [299, 'success'],
    [404, 'http_retryable'],
    [100, 'http_retryable'],
    [199, 'http_retryable'],
    [301, 'http_retryable'],
    [302, 'http_retryable'],
    [304, 'http_retryable'],
    [307, 'http_retryable'],
    [399, 'http_retryable'],
    [600, 'http_retryable'],
    [400, 'http_permanent'],
    [401, 'http_permanent'],
    [403, 'http_permanent'],
    [408, 'http_permanent'],
    [429, 'http_permanent'],
    [499, 'http_permanent'],
    [500, 'http_permanent'],
    [502, 'http_permanent'],
    [503, 'http_permanent'],
    [599, 'http_permanent'],
  ] as const)('%i → %s', (status, want) => {
    expect(classifyStatus(status)).toBe(want);
  });
});

describe('nextStep', () => {
  const opts = { retryDelayMs: 1_000 };
  it.each<[WebhookAttemptOutcome, number, string]>([
    ['success', 1, 'delivered'],
    ['success', 3, 'delivered'],
    ['http_retryable', 1, 'retry'],
    ['http_retryable', 2, 'retry'],
    ['http_retryable', 3, 'failed:attempts_exhausted'],
    ['network_error', 1, 'retry'],
    ['network_error', 3, 'failed:attempts_exhausted'],
    ['timeout', 2, 'retry'],
    ['timeout', 3, 'failed:attempts_exhausted'],
    ['http_permanent', 1, 'failed:permanent'],
    ['refused_by_policy', 1, 'failed:permanent'],
  ])('%s on attempt %i → %s', (outcome, attempt, want) => {
    const step = nextStep(outcome, attempt, opts);
    expect(step.action === 'failed' ? `failed:${step.reason}` : step.action).toBe(want);
  });

  it('never waits more than the spec allows between attempts', () => {
    expect(nextStep('timeout', 1, { retryDelayMs: 60_000 })).toEqual({ action: 'retry', delayMs: 5_000 });
    expect(nextStep('timeout', 1, { retryDelayMs: 250 })).toEqual({ action: 'retry', delayMs: 250 });
  });
});
