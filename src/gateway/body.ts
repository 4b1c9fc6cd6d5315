/** Reads a request body into memory with a hard size bound, and the Cortex "JSON object" check. */
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { ApiError, ErrorCode } from '../shared/errors.ts';
import { takeBody as takeBoundedBody } from '../shared/http/body.ts';

/**
 * 413 bodies of the run endpoint carried `limitBytes` before every error detail became snake_case:
 * the old spelling stays beside `limit_bytes` until it is removed (docs/gateway.md, Deprecations).
 */
export function withLegacyLimitBytes(err: unknown): unknown {
  if (err instanceof ApiError && err.code === ErrorCode.PayloadTooLarge && err.details) {
    return new ApiError(err.code, err.message, {
      details: { ...err.details, limitBytes: err.details.limit_bytes },
      cause: err.cause,
    });
  }
  return err;
}

/** The run endpoint's body (shared/http/body.ts takeBody): at once when it is buffered already. */
export function takeBody(req: IncomingMessage, limit: number): Buffer | Promise<Buffer> {
  let body: Buffer | Promise<Buffer>;
  try {
    body = takeBoundedBody(req, limit);
  } catch (err) {
    throw withLegacyLimitBytes(err);
  }
  return body instanceof Promise
    ? body.catch((err: unknown) => {
        throw withLegacyLimitBytes(err);
      })
    : body;
}

/**
 * Deepest nesting of arrays and objects a Cortex body may have. The runtime enforces the same number
 * (runtime/python/apphost_runtime/jsonbody.py MAX_DEPTH): keep them equal.
 */
export const MAX_JSON_DEPTH = 512;

const invalid = (message: string, details?: Record<string, unknown>) =>
  new ApiError(ErrorCode.InvalidBody, message, details ? { details } : {});

/** Whether `text` has more than `limit` `[`/`{` characters, counted only as far as needed. */
function hasMoreOpeners(text: string, limit: number): boolean {
  let n = 0;
  for (const ch of ['[', '{']) {
    for (let i = text.indexOf(ch); i !== -1; i = text.indexOf(ch, i + 1)) if (++n > limit) return true;
  }
  return false;
}

/** A number JSON.parse turns into ±Infinity needs an exponent or an integer part of 309+ digits. */
const MAYBE_OUT_OF_RANGE = /\d[eE]|\d{309}/;

/** Depth and the first top-level argument holding a non-finite number, without recursion. */
function inspect(value: unknown): { depth: number; outOfRange?: string } {
  let depth = 0;
  const stack: Array<{ v: unknown; d: number; arg: string | undefined }> = [
    { v: value, d: 0, arg: undefined },
  ];
  while (stack.length > 0) {
    const { v, d, arg } = stack.pop() as { v: unknown; d: number; arg: string | undefined };
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return { depth, outOfRange: arg ?? '' };
    } else if (typeof v === 'object' && v !== null) {
      if (d + 1 > depth) depth = d + 1;
      if (depth > MAX_JSON_DEPTH) return { depth };
      if (Array.isArray(v)) for (const item of v) stack.push({ v: item, d: d + 1, arg });
      else for (const [k, item] of Object.entries(v)) stack.push({ v: item, d: d + 1, arg: arg ?? k });
    }
  }
  return { depth };
}

/**
 * A Cortex function takes keyword arguments: the body is empty or a JSON object, under the runtime's
 * rules (UTF-8, nesting, numbers that fit a float), so a run the runtime would refuse is a 400 here —
 * before an async run is accepted, not a failure after it.
 */
export function checkCortexBody(body: Buffer): void {
  if (!isUtf8(body)) throw invalid('request body is not valid UTF-8');
  // The usual body passes on its bytes, without a string, a parsed object or a regular expression.
  if (isPlainJsonObject(body)) return;
  const text = body.toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    // An empty (or blank) body is no arguments; only a body that is not blank must parse.
    if (text.trim() === '') return;
    throw invalid(`request body is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw invalid('request body must be a JSON object of keyword arguments');
  }
  // A text shorter than the depth bound cannot be nested deeper than it.
  const mayBeTooDeep = text.length > MAX_JSON_DEPTH && hasMoreOpeners(text, MAX_JSON_DEPTH);
  if (!mayBeTooDeep && !MAYBE_OUT_OF_RANGE.test(text)) return;
  const found = inspect(parsed);
  if (found.depth > MAX_JSON_DEPTH)
    throw invalid(`request body is nested deeper than ${MAX_JSON_DEPTH} levels`, { limit: MAX_JSON_DEPTH });
  if (found.outOfRange !== undefined)
    throw invalid(
      `argument '${found.outOfRange}': number is out of range (a JSON number must fit a 64-bit float)`,
      { argument: found.outOfRange },
    );
}

// Bytes of JSON's syntax.
const TAB = 0x09;
const LINE_FEED = 0x0a;
const CARRIAGE_RETURN = 0x0d;
const SPACE = 0x20;
const QUOTE = 0x22;
const COMMA = 0x2c;
const MINUS = 0x2d;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const COLON = 0x3a;
const OPEN_ARRAY = 0x5b;
const BACKSLASH = 0x5c;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
/** The characters a JSON escape may name after its backslash (besides `u`). */
const ESCAPED = new Uint8Array(128);
for (const ch of '"\\/bfnrt') ESCAPED[ch.charCodeAt(0)] = 1;
const HEX = new Uint8Array(128);
for (const ch of '0123456789abcdefABCDEF') HEX[ch.charCodeAt(0)] = 1;
/** Whether each open container is an object (1) or an array (0); reused, the scan is synchronous. */
const open = new Uint8Array(MAX_JSON_DEPTH);

const skipSpace = (b: Buffer, i: number): number => {
  let c = b[i];
  while (c === SPACE || c === LINE_FEED || c === CARRIAGE_RETURN || c === TAB) c = b[++i];
  return i;
};

/** The index after the string whose opening quote is before `i`, or -1 if it is not one. */
function stringEnd(b: Buffer, i: number): number {
  const n = b.length;
  while (i < n) {
    const c = b[i] as number;
    if (c === QUOTE) return i + 1;
    if (c < SPACE) return -1;
    if (c === BACKSLASH) {
      const e = b[i + 1] as number;
      if (e === 0x75) {
        // \uXXXX (a lone surrogate too: JSON.parse takes it)
        if (
          !(
            HEX[b[i + 2] as number] &&
            HEX[b[i + 3] as number] &&
            HEX[b[i + 4] as number] &&
            HEX[b[i + 5] as number]
          )
        )
          return -1;
        i += 6;
      } else if (e < 128 && ESCAPED[e]) i += 2;
      else return -1;
    } else i++;
  }
  return -1;
}

const isDigit = (c: number | undefined) => c !== undefined && c >= ZERO && c <= NINE;

/**
 * The index after the number at `i`, or -1 if it is not one — or has an exponent or 309+ integer digits,
 * the only numbers that may not fit a float (left to the full check).
 */
function numberEnd(b: Buffer, i: number): number {
  if (b[i] === MINUS) i++;
  const start = i;
  if (b[i] === ZERO) i++;
  else while (isDigit(b[i])) i++;
  if (i === start || i - start >= 309 || isDigit(b[i])) return -1;
  if (b[i] === DOT) {
    const fraction = ++i;
    while (isDigit(b[i])) i++;
    if (i === fraction) return -1;
  }
  const c = b[i];
  return c === 0x65 || c === 0x45 ? -1 : i;
}

/** The index of a member's value: after its key (the opening quote at `i`), its colon and the spaces; or -1. */
function memberValueStart(b: Buffer, i: number): number {
  if (b[i] !== QUOTE) return -1;
  const end = stringEnd(b, i + 1);
  if (end === -1) return -1;
  const colon = skipSpace(b, end);
  return b[colon] === COLON ? skipSpace(b, colon + 1) : -1;
}

const literalEnd = (b: Buffer, i: number, word: string): number => {
  for (let k = 0; k < word.length; k++) if (b[i + k] !== word.charCodeAt(k)) return -1;
  return i + word.length;
};

/**
 * Whether `body` (valid UTF-8) is surely what checkCortexBody lets through: JSON (RFC 8259, as
 * JSON.parse reads it) whose top value is an object, nested at most MAX_JSON_DEPTH deep, with no number
 * that may not fit a float. It reads the bytes once and builds nothing. `false` means "not sure": the
 * full check decides, with its own error message.
 */
export function isPlainJsonObject(b: Buffer): boolean {
  let i = skipSpace(b, 0);
  if (b[i] !== OPEN_OBJECT) return false;
  let depth = 0;
  for (;;) {
    // A value starts at i.
    const c = b[i];
    if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (depth === MAX_JSON_DEPTH) return false;
      const isObject = c === OPEN_OBJECT;
      open[depth++] = isObject ? 1 : 0;
      i = skipSpace(b, i + 1);
      if (b[i] === (isObject ? CLOSE_OBJECT : CLOSE_ARRAY)) {
        depth--;
        i++;
      } else if (isObject) {
        i = memberValueStart(b, i);
        if (i === -1) return false;
        continue;
      } else continue;
    } else if (c === QUOTE) i = stringEnd(b, i + 1);
    else if (c === MINUS || isDigit(c)) i = numberEnd(b, i);
    else if (c === 0x74) i = literalEnd(b, i, 'true');
    else if (c === 0x66) i = literalEnd(b, i, 'false');
    else if (c === 0x6e) i = literalEnd(b, i, 'null');
    else return false;
    if (i === -1) return false;
    // After a value: a comma and the next one, or the end of containers.
    for (;;) {
      if (depth === 0) return skipSpace(b, i) === b.length;
      i = skipSpace(b, i);
      const isObject = open[depth - 1] === 1;
      const d = b[i];
      if (d === (isObject ? CLOSE_OBJECT : CLOSE_ARRAY)) {
        depth--;
        i++;
        continue;
      }
      if (d !== COMMA) return false;
      i = skipSpace(b, i + 1);
      if (isObject) {
        i = memberValueStart(b, i);
        if (i === -1) return false;
      }
      break;
    }
  }
}
