import { describe, expect, it } from 'vitest';
import { readOperatorEnv } from './settings.ts';

describe('readOperatorEnv', () => {
  it('operator: a cross-field rule names the variable to fix', () => {
    expect(() =>
      readOperatorEnv({
        APPHOST_OPERATOR_LEASE_DURATION_MS: '3000',
        APPHOST_OPERATOR_RENEW_DEADLINE_MS: '3000',
      }),
    ).toThrow('APPHOST_OPERATOR_RENEW_DEADLINE_MS: must be less than APPHOST_OPERATOR_LEASE_DURATION_MS');
  });
});
