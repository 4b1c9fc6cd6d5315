/** Reads a request body into memory with a hard size bound, and the Cortex "JSON object" check. */
import type { IncomingMessage } from 'node:http';
import { ApiError, ErrorCode } from '../shared/errors.ts';

function tooLarge(limit: number): ApiError {
  return new ApiError(ErrorCode.PayloadTooLarge, `request body is larger than ${limit} bytes`, {
    details: { limitBytes: limit },
  });
}

export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > limit) throw tooLarge(limit);
    chunks.push(buf);
  }
  return Buffer.concat(chunks);
}

/** A Cortex function takes keyword arguments: the body is empty or a JSON object. */
export function checkCortexBody(body: Buffer): void {
  const text = body.toString('utf8');
  if (text.trim() === '') return;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new ApiError(ErrorCode.InvalidBody, `request body is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ApiError(ErrorCode.InvalidBody, 'request body must be a JSON object of keyword arguments');
  }
}
