/**
 * Kubernetes API errors → ApiError, faas-netes style (pkg/handlers/errors.go): NotFound/Gone → 404,
 * AlreadyExists/Conflict → 409, Invalid → 422, BadRequest → 400, TooManyRequests/503 → 502 (retry),
 * anything else → 500. Forbidden is
 * 500 here, not 403: it means the management API's own RBAC is missing, not that the caller may not.
 */
import { ApiError, ErrorCode } from '../../shared/errors.ts';

interface KubeStatusBody {
  reason?: string;
  message?: string;
}

/** The HTTP status of a client-node ApiException (or similar), if it is one. */
export function kubeStatusCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'number' ? code : undefined;
}

function statusBody(err: unknown): KubeStatusBody {
  const body = (err as { body?: unknown } | undefined)?.body;
  if (typeof body === 'string') {
    try {
      return JSON.parse(body) as KubeStatusBody;
    } catch {
      return {};
    }
  }
  return typeof body === 'object' && body !== null ? (body as KubeStatusBody) : {};
}

export function isKubeNotFound(err: unknown): boolean {
  return kubeStatusCode(err) === 404;
}

export function isKubeConflict(err: unknown): boolean {
  return kubeStatusCode(err) === 409;
}

export function mapKubeError(err: unknown, what: string): ApiError {
  if (err instanceof ApiError) return err;
  const code = kubeStatusCode(err);
  const body = statusBody(err);
  const reason = body.reason;
  const detail = body.message ? `: ${body.message}` : '';
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
    return new ApiError(ErrorCode.Internal, `the management API may not access ${what}`, { cause: err });
  return new ApiError(ErrorCode.Internal, 'internal error', { cause: err });
}
