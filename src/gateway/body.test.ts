import { describe, expect, it } from 'vitest';
import { ApiError } from '../shared/errors.ts';
import { checkCortexBody, isPlainJsonObject, MAX_JSON_DEPTH } from './body.ts';
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
  const nearMisses = [
    '{"a":1,}',
    '{,}',
    '{"a" 1}',
    '{"a":}',
    '{"a"}',
    "{'a':1}",
    '{a:1}',
    '{"a":[1,]}',
    '{"a":[,1]}',
    '{"a":[1 2]}',
    '{"a":01}',
    '{"a":-01}',
    '{"a":1.}',
    '{"a":.5}',
    '{"a":-}',
    '{"a":+1}',
    '{"a":1.5.5}',
    '{"a":0x10}',
    '{"a":tru}',
    '{"a":nul}',
    '{"a":True}',
    '{"a":falsey}',
    '{"a":Infinity}',
    '{"a":-Infinity}',
    '{"a":"\\x41"}',
    '{"a":"\\u12G4"}',
    '{"a":"\\u12"}',
    '{"a":"\\',
    '{"a":"tab\there"}',
    '{"a":"raw\u0001"}',
    '{"a":"line\nbreak"}',
    '{"a":"open',
    '{"a":1',
    '{"a":{"b":1}',
    '{"a":[1}',
    '{"a":{1]}',
    '{"a":1}}',
    '{"a":1}]',
    '{"a":1} x',
    '{"a":1}{}',
    '{"a":1},',
    '\ufeff{"a":1}',
    '\u00a0{"a":1}',
    '{"a":1}\u00a0',
    '{"a":1}\u000b',
    '{"a":1\u000c}',
    '[{"a":1}]',
    '{"a":1e}',
    '{"a":1e+}',
    '{"a":1E400}',
  ];
  it.each(nearMisses)('refuses %j as the full check does', (b) => {
    expect(fullCheck(b)).toBe('refused');
    expect(isPlainJsonObject(Buffer.from(b))).toBe(false);
    expect(() => checkCortexBody(Buffer.from(b))).toThrow(ApiError);
  });

  it.each([
    '{}',
    ' {"a":[1,2]} ',
    '{"user":"bench","n":42,"tags":["a","b","c"]}',
    '{"a":-0,"b":0.25,"c":-12.5,"d":true,"e":false,"f":null,"g":{},"h":[]}',
    '{"s":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD800 é 😀 \u2028"}',
    '\t\r\n{ "a" : [ { } , [ ] ] }\n',
    `{"n":${'9'.repeat(308)}}`,
  ])('passes %j on its bytes alone', (b) => {
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
    const seeds = [
      '{"user":"bench","n":42,"tags":["a","b","c"]}',
      '{"a":{"b":[1,-2.5,true,false,null,"x\\"y\\u0041"]},"c":{}}',
      '{ "k" : [ 0 , 10 , -0.5 ] , "s" : "\\n" }',
    ];
    const alphabet = '{}[]":,.-+0123456789eEtrufalsn \t\n\r\\/ux\u00e9\u0001';
    let state = 0x9e3779b9;
    const rand = (n: number) => {
      state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
      return state % n;
    };
    let passed = 0;
    let refused = 0;
    for (let k = 0; k < 20_000; k++) {
      let text = seeds[rand(seeds.length)] as string;
      for (let m = 1 + rand(3); m > 0; m--) {
        const at = rand(text.length + 1);
        const ch = alphabet[rand(alphabet.length)] as string;
        const op = rand(3);
        text =
          op === 0
            ? text.slice(0, at) + ch + text.slice(at)
            : op === 1
              ? text.slice(0, at) + text.slice(at + 1)
              : text.slice(0, at) + ch + text.slice(at + 1);
      }
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
