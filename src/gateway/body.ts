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
