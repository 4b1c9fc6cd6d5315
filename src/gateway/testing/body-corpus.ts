/**
 * Bodies the Cortex body check is tested on, in one place: body.test.ts holds the byte scan to the full
 * check with them, and hack/dataplane-vectors.ts turns them into the native data plane's vectors, so the
 * two never drift apart.
 */

/** Near misses of a JSON object: refused by the full check and by the byte scan. */
export const NEAR_MISS_BODIES: readonly string[] = [
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

/** Bodies the byte scan passes alone (no full check). */
export const BODIES_PASSED_ON_BYTES: readonly string[] = [
  '{}',
  ' {"a":[1,2]} ',
  '{"user":"bench","n":42,"tags":["a","b","c"]}',
  '{"a":-0,"b":0.25,"c":-12.5,"d":true,"e":false,"f":null,"g":{},"h":[]}',
  '{"s":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD800 é 😀 \u2028"}',
  '\t\r\n{ "a" : [ { } , [ ] ] }\n',
  `{"n":${'9'.repeat(308)}}`,
];

/** The mutated corpus's seed: body.test.ts and the vectors draw the same bodies, in the same order. */
export const MUTATION_SEED = 0x9e3779b9;

/** A deterministic n → [0, n) source (a 32-bit mix; the same sequence on every machine). */
export function seededRandom(seed: number): (n: number) => number {
  let state = seed >>> 0;
  return (n) => {
    state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return state % n;
  };
}

const MUTATION_BASES = [
  '{"user":"bench","n":42,"tags":["a","b","c"]}',
  '{"a":{"b":[1,-2.5,true,false,null,"x\\"y\\u0041"]},"c":{}}',
  '{ "k" : [ 0 , 10 , -0.5 ] , "s" : "\\n" }',
];
const MUTATION_ALPHABET = '{}[]":,.-+0123456789eEtrufalsn \t\n\r\\/ux\u00e9\u0001';

/** Valid objects with 1–3 characters inserted, deleted or replaced: mostly near misses, some still valid. */
export function* mutatedBodies(seed = MUTATION_SEED): Generator<string> {
  const rand = seededRandom(seed);
  for (;;) {
    let text = MUTATION_BASES[rand(MUTATION_BASES.length)] as string;
    for (let m = 1 + rand(3); m > 0; m--) {
      const at = rand(text.length + 1);
      const ch = MUTATION_ALPHABET[rand(MUTATION_ALPHABET.length)] as string;
      const op = rand(3);
      text =
        op === 0
          ? text.slice(0, at) + ch + text.slice(at)
          : op === 1
            ? text.slice(0, at) + text.slice(at + 1)
            : text.slice(0, at) + ch + text.slice(at + 1);
    }
    yield text;
  }
}
