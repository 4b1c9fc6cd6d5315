import { describe, expect, it } from 'vitest';
import { ApiError } from '../shared/errors.ts';
import { checkCortexBody } from './body.ts';
import { isAsyncRequested } from './handlers/prepare.ts';

describe('checkCortexBody', () => {
  it.each(['', '  ', '{}', '{"a":[1,2]}'])('accepts %j', (b) => {
    expect(() => checkCortexBody(Buffer.from(b))).not.toThrow();
  });
  it.each(['{', '[1]', '"s"', '3', 'null', 'true'])('rejects %j with 400', (b) => {
    try {
      checkCortexBody(Buffer.from(b));
      expect.unreachable();
    } catch (err) {
      expect((err as ApiError).status).toBe(400);
    }
  });
});

describe('isAsyncRequested', () => {
  it.each([
    [undefined, false],
    ['true', true],
    ['TRUE', true],
    ['1', true],
    ['false', false],
    ['', false],
  ])('%s → %s', (v, want) => {
    expect(isAsyncRequested(v)).toBe(want);
  });
  it('rejects anything else with 400', () => {
    expect(() => isAsyncRequested('yes')).toThrow(ApiError);
  });
});
