/**
 * The error taxonomy every HTTP surface shares: a stable `code`, the HTTP status it maps to, and a
 * message for humans. Bodies are always `{"error": {"code", "message", ...details}}`, details in
 * snake_case (the Python runtime answers the same shape: docs/architecture.md, "Error bodies").
 */
import { z } from 'zod';

export const ErrorCode = {
  BadRequest: 'bad_request',
  InvalidBody: 'invalid_body',
  /** An uploaded app bundle or its apphost.toml is not acceptable: `problem` (and `problems`) say why. */
  InvalidBundle: 'invalid_bundle',
  InvalidWebhookEndpoint: 'invalid_webhook_endpoint',
  Unauthenticated: 'unauthenticated',
  Forbidden: 'forbidden',
  NotFound: 'not_found',
  MethodNotAllowed: 'method_not_allowed',
  Conflict: 'conflict',
  PayloadTooLarge: 'payload_too_large',
  UnsupportedMediaType: 'unsupported_media_type',
  Unprocessable: 'unprocessable',
  AppNotReady: 'app_not_ready',
  /** The app's queue of calls waiting for a free replica slot is full. */
  QueueFull: 'queue_full',
  /** No replica slot came free within the queue wait bound. */
  QueueTimeout: 'queue_timeout',
  /** No replica became ready within the cold-start bound. */
  ColdStartTimeout: 'cold_start_timeout',
  /** The app cannot start (image pull, crash loop, import error): the cause is in the message. */
  AppStartFailed: 'app_start_failed',
  QueueUnavailable: 'queue_unavailable',
  ShuttingDown: 'shutting_down',
  /**
   * Native data plane only (docs/design/native-data-plane.md §3): the gateway's Node process refused a
   * handed-off call's connection, or sent no answer head within the hand-off bound.
   */
  GatewayUnavailable: 'gateway_unavailable',
  UpstreamUnreachable: 'upstream_unreachable',
  UpstreamTimeout: 'upstream_timeout',
  Internal: 'internal',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

const STATUS: Record<ErrorCode, number> = {
  bad_request: 400,
  invalid_body: 400,
  invalid_bundle: 400,
  invalid_webhook_endpoint: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  unprocessable: 422,
  app_not_ready: 503,
  queue_full: 503,
  queue_timeout: 503,
  cold_start_timeout: 503,
  app_start_failed: 503,
  queue_unavailable: 503,
  shutting_down: 503,
  gateway_unavailable: 503,
  upstream_unreachable: 502,
  upstream_timeout: 504,
  internal: 500,
};

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: Record<string, unknown> | undefined;
  /** Seconds for a Retry-After header (503s). */
  readonly retryAfter: number | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { details?: Record<string, unknown>; retryAfter?: number; cause?: unknown } = {},
  ) {
    super(message, { cause: opts.cause });
    this.name = 'ApiError';
    this.code = code;
    this.status = STATUS[code];
    this.details = opts.details;
    this.retryAfter = opts.retryAfter;
  }

  toBody(): { error: Record<string, unknown> } {
    return { error: { code: this.code, message: this.message, ...this.details } };
  }
}

export function statusOf(code: ErrorCode): number {
  return STATUS[code];
}

/** Anything thrown becomes an ApiError; unknown errors are 500 with a message that leaks nothing. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const status = (err as { status?: unknown; statusCode?: unknown })?.status;
  if (typeof status === 'number') {
    if (status === 413) return new ApiError(ErrorCode.PayloadTooLarge, 'request body is too large');
    if (status === 415) return new ApiError(ErrorCode.UnsupportedMediaType, String((err as Error).message));
    if (status >= 400 && status < 500)
      return new ApiError(ErrorCode.BadRequest, String((err as Error).message));
  }
  return new ApiError(ErrorCode.Internal, 'internal error', { cause: err });
}

/** The error body as a schema (the OpenAPI document's `Error`). */
export const ErrorBody = z
  .strictObject({
    error: z.looseObject({
      code: z.string().meta({
        description: 'Stable machine-readable code, e.g. not_found, invalid_body, unauthenticated.',
      }),
      message: z.string().meta({ description: 'What went wrong, for humans.' }),
      problems: z
        .array(z.strictObject({ path: z.string(), message: z.string() }))
        .meta({ description: 'Each validation problem (400s only).' })
        .optional(),
    }),
  })
  .meta({ id: 'Error' });
