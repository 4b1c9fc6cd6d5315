/**
 * One taxonomy for Kubernetes API errors, whichever client raised them (an ApiException of client-node's
 * typed or object APIs, its Watch, a watch ERROR event turned into a KubeApiError by our client, or a
 * KubeApiError of the gateway's read-only reader, reader.ts, whose timeouts and network failures are plain
 * Errors and so map to 500):
 * `kubeStatusOf` reads the HTTP status and the Status reason, `isNotFound`/`isConflict`/`isGone` classify, and `kubeErrorToApiError` is the one mapping to the
 * platform's error codes (faas-netes style, pkg/handlers/errors.go): NotFound/Gone → 404,
 * AlreadyExists/Conflict → 409, Invalid → 422, BadRequest → 400, TooManyRequests/503/504 → 502 (retry),
 * anything else → 500. Forbidden is 500, not 403: it means our own RBAC is missing, not that the caller
 * may not.
 */
import { ApiError, ErrorCode } from '../errors.ts';

/** An error answer of the API server, with its HTTP status and Status reason. */
export class KubeApiError extends Error {
  readonly statusCode: number;
  readonly reason: string | undefined;
  constructor(statusCode: number, reason: string | undefined, message: string) {
    super(message);
    this.name = 'KubeApiError';
    this.statusCode = statusCode;
    this.reason = reason;
  }
}

export interface KubeStatus {
  code: number | undefined;
  reason: string | undefined;
  message: string | undefined;
}

function statusBody(body: unknown): { reason?: string; message?: string } {
  if (typeof body === 'string') {
    try {
      return JSON.parse(body) as { reason?: string; message?: string };
    } catch {
      return {};
    }
  }
  return typeof body === 'object' && body !== null ? (body as { reason?: string; message?: string }) : {};
}

/**
 * The status of a Kubernetes API error: a KubeApiError, client-node's ApiException `{code, body}`, or
 * the error client-node's Watch reports for a refused watch request (`{statusCode}`, no body).
 */
export function kubeStatusOf(err: unknown): KubeStatus {
  if (err instanceof KubeApiError) return { code: err.statusCode, reason: err.reason, message: err.message };
  const e = err as { code?: unknown; statusCode?: unknown; body?: unknown } | undefined;
  const code =
    typeof e?.code === 'number' ? e.code : typeof e?.statusCode === 'number' ? e.statusCode : undefined;
  const body = code === undefined ? {} : statusBody(e?.body);
  return { code, reason: body.reason, message: body.message };
}

export const isNotFound = (err: unknown): boolean => kubeStatusOf(err).code === 404;
export const isConflict = (err: unknown): boolean => kubeStatusOf(err).code === 409;
export const isGone = (err: unknown): boolean => kubeStatusOf(err).code === 410;

/** `what` names the object for the message, e.g. `domain shop-com`. */
export function kubeErrorToApiError(err: unknown, what: string): ApiError {
  if (err instanceof ApiError) return err;
  const { code, reason, message } = kubeStatusOf(err);
  const detail = message && !(err instanceof KubeApiError) ? `: ${message}` : '';
  if (reason === 'NotFound' || reason === 'Gone' || code === 404 || code === 410)
    return new ApiError(ErrorCode.NotFound, `${what} not found`, { cause: err });
  if (reason === 'AlreadyExists' || reason === 'Conflict' || code === 409)
    return new ApiError(ErrorCode.Conflict, `${what} conflicts with an existing object${detail}`, {
      cause: err,
    });
  if (reason === 'Invalid' || code === 422)
    return new ApiError(ErrorCode.Unprocessable, `${what} is invalid${detail}`, { cause: err });
  if (reason === 'BadRequest' || code === 400)
    return new ApiError(ErrorCode.BadRequest, `${what}: bad request${detail}`, { cause: err });
  if (reason === 'TooManyRequests' || code === 429 || code === 503 || code === 504)
    return new ApiError(
      ErrorCode.UpstreamUnreachable,
      'the Kubernetes API is busy or starting; retry shortly',
      {
        cause: err,
        retryAfter: 1,
      },
    );
  if (reason === 'Forbidden' || code === 403)
    return new ApiError(ErrorCode.Internal, `apphost may not access ${what} (its RBAC is missing)`, {
      cause: err,
    });
  return new ApiError(ErrorCode.Internal, 'internal error', { cause: err });
}
