import { describe, expect, it } from 'vitest';
import { ApiError } from '../shared/errors.ts';
import { checkCortexBody, isPlainJsonObject, MAX_JSON_DEPTH } from './body.ts';
import { isAsyncRequested } from './handlers/prepare.ts';
import { BODIES_PASSED_ON_BYTES, mutatedBodies, NEAR_MISS_BODIES } from './testing/body-corpus.ts';

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

// The full check without the byte scan in front of it: what every body must get either way.
function fullCheck(text: string): 'ok' | 'refused' {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return text.trim() === '' ? 'ok' : 'refused';
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return 'refused';
  const stack: Array<[unknown, number]> = [[parsed, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop() as [unknown, number];
    if (typeof v === 'number' && !Number.isFinite(v)) return 'refused';
    if (typeof v === 'object' && v !== null) {
      if (d > MAX_JSON_DEPTH) return 'refused';
      for (const item of Object.values(v)) stack.push([item, d + 1]);
    }
  }
  return 'ok';
}

describe('checkCortexBody: the byte scan in front of the full check', () => {
  it.each(NEAR_MISS_BODIES)('refuses %j as the full check does', (b) => {
    expect(fullCheck(b)).toBe('refused');
    expect(isPlainJsonObject(Buffer.from(b))).toBe(false);
    expect(() => checkCortexBody(Buffer.from(b))).toThrow(ApiError);
  });

  it.each(BODIES_PASSED_ON_BYTES)('passes %j on its bytes alone', (b) => {
    expect(fullCheck(b)).toBe('ok');
    expect(isPlainJsonObject(Buffer.from(b))).toBe(true);
  });

  it('leaves exponents, 309-digit integers and the depth limit to the full check', () => {
    expect(isPlainJsonObject(Buffer.from('{"a":1e5}'))).toBe(false);
    expect(isPlainJsonObject(Buffer.from(`{"n":${'9'.repeat(309)}}`))).toBe(false);
    const nested = (levels: number) => `{"a":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;
    expect(isPlainJsonObject(Buffer.from(nested(MAX_JSON_DEPTH)))).toBe(true);
    expect(isPlainJsonObject(Buffer.from(nested(MAX_JSON_DEPTH + 1)))).toBe(false);
  });

  it('never passes a body the full check refuses (mutated bodies, fixed seed)', () => {
    const bodies = mutatedBodies();
    let passed = 0;
    let refused = 0;
    for (let k = 0; k < 20_000; k++) {
      const text = bodies.next().value as string;
      const want = fullCheck(text);
      if (isPlainJsonObject(Buffer.from(text))) {
        expect(want, text).toBe('ok');
        passed++;
      }
      if (want === 'refused') {
        expect(() => checkCortexBody(Buffer.from(text)), text).toThrow(ApiError);
        refused++;
      }
    }
    // Both kinds occur, so the comparison above means something.
    expect(passed).toBeGreaterThan(1_000);
    expect(refused).toBeGreaterThan(1_000);
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
