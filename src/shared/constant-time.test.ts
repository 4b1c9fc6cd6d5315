import { describe, expect, it } from 'vitest';
import { sameStringInConstantTime } from './constant-time.ts';

describe('sameStringInConstantTime', () => {
  const token = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl';

  it('is true for equal strings, also when they are different objects', () => {
    expect(sameStringInConstantTime(token, token.slice(0))).toBe(true);
    expect(sameStringInConstantTime(token, [...token].join(''))).toBe(true);
    expect(sameStringInConstantTime('', '')).toBe(true);
  });

  it('is false for a difference at any position, including the first and the last', () => {
    for (let i = 0; i < token.length; i++) {
      const other = token.slice(0, i) + (token[i] === 'x' ? 'y' : 'x') + token.slice(i + 1);
      expect(sameStringInConstantTime(token, other), `position ${i}`).toBe(false);
    }
  });

  it('is false for a prefix, an extension and a different length', () => {
    expect(sameStringInConstantTime(token, token.slice(0, -1))).toBe(false);
    expect(sameStringInConstantTime(token, `${token}a`)).toBe(false);
    expect(sameStringInConstantTime('', 'a')).toBe(false);
  });

  it('compares UTF-16 code units, not only their low bytes', () => {
    expect(sameStringInConstantTime('\u0141', 'A')).toBe(false);
    expect(sameStringInConstantTime('é', 'é')).toBe(true);
  });
});
