import { describe, expect, it } from 'vitest';
import { formatToken, hashSecret, newTokenSecret, parseToken, secretMatches } from './tokens.ts';

describe('service-account tokens', () => {
  it('round-trips and matches only its own secret', () => {
    const secret = newTokenSecret();
    const token = formatToken('my-project', 'ci-bot', secret);
    expect(parseToken(token)).toEqual({ projectId: 'my-project', name: 'ci-bot', secret });
    expect(secretMatches(secret, hashSecret(secret))).toBe(true);
    expect(secretMatches(newTokenSecret(), hashSecret(secret))).toBe(false);
    expect(secretMatches(secret, '')).toBe(false);
    expect(secretMatches(secret, 'zz')).toBe(false);
  });

  it.each([
    [''],
    ['ahsa'],
    ['ahsa_p_n'],
    [`xxxx_p_n_${'a'.repeat(64)}`],
    [`ahsa_p_n_${'A'.repeat(64)}`],
    [`ahsa_p_n_${'a'.repeat(63)}`],
    [`ahsa__n_${'a'.repeat(64)}`],
    [`ahsa_p_n_x_${'a'.repeat(64)}`],
  ])('rejects %j', (t) => {
    expect(parseToken(t)).toBeUndefined();
  });
});
