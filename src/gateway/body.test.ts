import { describe, expect, it } from 'vitest';
import { ApiError } from '../shared/errors.ts';
import { checkCortexBody, MAX_JSON_DEPTH } from './body.ts';
import { isAsyncRequested } from './handlers/prepare.ts';

describe('checkCortexBody', () => {
  it.each(['', '  ', '\n\t ', '{}', ' {"a":[1,2]} '])('accepts %j', (b) => {
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

describe("checkCortexBody: the runtime's rules", () => {
  const nested = (levels: number) => `{"a":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;
  const refusal = (body: Buffer | string) => {
    try {
      checkCortexBody(Buffer.isBuffer(body) ? body : Buffer.from(body));
    } catch (err) {
      return err as ApiError;
    }
    return undefined;
  };

  it.each([
    ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]), /UTF-8/],
    [
      'a lone continuation byte',
      Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0x80]), Buffer.from('"}')]),
      /UTF-8/,
    ],
    ['1,000 levels', `{"a":${'['.repeat(999)}${']'.repeat(999)}}`, /nested deeper than 512/],
    ['100,000 levels', `{"a":${'['.repeat(99_999)}${']'.repeat(99_999)}}`, /nested deeper than 512/],
    ['one level too many', nested(MAX_JSON_DEPTH + 1), /nested deeper than 512/],
    ['1e999999', '{"name":1e999999}', /argument 'name': number is out of range/],
    ['-1e400 deep inside', '{"x":1,"name":{"deep":[1,-1e400]}}', /argument 'name'/],
    ['a 400-digit integer', `{"name":1${'0'.repeat(400)}}`, /argument 'name'/],
    ['NaN', '{"name":NaN}', /not valid JSON/],
  ])('refuses %s with 400 invalid_body', (_name, body, message) => {
    const err = refusal(body);
    expect(err?.status).toBe(400);
    expect(err?.code).toBe('invalid_body');
    expect(err?.message).toMatch(message);
  });

  it.each([
    ['exactly the depth limit', nested(MAX_JSON_DEPTH)],
    ['the largest double', '{"a":1.7976931348623157e308}'],
    ['brackets and exponents inside strings', `{"s":"${'['.repeat(2000)} 1e999999"}`],
    ['many shallow objects', `{"a":[${Array.from({ length: 2000 }, () => '{"b":1e5}').join(',')}]}`],
  ])('accepts %s', (_name, body) => {
    expect(refusal(body)).toBeUndefined();
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
