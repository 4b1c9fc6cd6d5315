/** Reads a JSON request body with a size bound: too big → 413, not JSON → 415/400. */
import type { Context } from 'koa';
import { ApiError, ErrorCode } from '../shared/errors.ts';

/** undefined when the request has no body. */
export async function readJsonBody(ctx: Context, limitBytes: number): Promise<unknown> {
  const declared = Number(ctx.get('content-length') || Number.NaN);
  const tooLarge = () =>
    new ApiError(ErrorCode.PayloadTooLarge, `request body is larger than ${limitBytes} bytes`, {
      details: { limit_bytes: limitBytes },
    });
  if (declared > limitBytes) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limitBytes) throw tooLarge();
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  if (!ctx.is('application/json'))
    throw new ApiError(ErrorCode.UnsupportedMediaType, 'request body must be application/json');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ApiError(ErrorCode.InvalidBody, 'request body is not valid JSON');
  }
}
