import { describe, expect, it } from 'vitest';
import {
  canonicalJson,
  firstDifference,
  isInPlace,
  isSubset,
  parseQuantity,
  withIntentHash,
} from './desired-state.ts';

describe('isSubset', () => {
  it.each([
    ['server defaults are ignored', { a: 1 }, { a: 1, b: 2 }, true],
    ['a changed value is not', { a: 1 }, { a: 2 }, false],
    ['arrays compare by length and element', [{ a: 1 }], [{ a: 1, d: 0 }], true],
    ['an extra element is a difference', [{ a: 1 }], [{ a: 1 }, { a: 2 }], false],
    ['a missing field is a difference', { a: { b: 1 } }, { a: {} }, false],
    [
      'quantities compare by value under requests',
      { requests: { cpu: '0.5' } },
      { requests: { cpu: '500m' } },
      true,
    ],
    ['different quantities differ', { limits: { memory: '1Gi' } }, { limits: { memory: '1G' } }, false],
    ['quantity equivalence only applies under requests/limits', { env: '0.5' }, { env: '500m' }, false],
  ])('%s', (_n, desired, actual, want) => {
    expect(isSubset(desired, actual)).toBe(want);
  });

  it('names the first difference', () => {
    expect(firstDifference({ spec: { a: [1, { b: 2 }] } }, { spec: { a: [1, { b: 3 }] } })).toBe(
      '.spec.a[1].b',
    );
  });
});

describe('parseQuantity', () => {
  it.each([
    ['500m', 0.5],
    ['2', 2],
    ['1Ki', 1024],
    ['1e3', 1000],
    ['1.5Gi', 1.5 * 2 ** 30],
  ])('%s', (q, n) => expect(parseQuantity(q)).toBe(n));
  it('rejects junk', () => expect(parseQuantity('abc')).toBeUndefined());
});

describe('isInPlace', () => {
  const desired = withIntentHash({ metadata: { name: 'x' }, spec: { a: 1 } });
  it('true when the live object has our fields and our hash', () => {
    expect(isInPlace(desired, { ...desired, metadata: { ...desired.metadata, uid: 'u' } })).toBe(true);
  });
  it('false when a field we no longer set is still there (hash differs)', () => {
    const old = withIntentHash({ metadata: { name: 'x' }, spec: { a: 1, b: 2 } });
    expect(isInPlace(desired, old)).toBe(false);
  });
  it('false when missing', () => expect(isInPlace(desired, undefined)).toBe(false));
  it('canonical JSON ignores key order', () =>
    expect(canonicalJson({ b: 1, a: [2] })).toBe(canonicalJson({ a: [2], b: 1 })));
});
