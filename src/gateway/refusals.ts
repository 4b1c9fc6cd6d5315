/**
 * The gateway's own refusals that are not a step of a call: what it answers while it drains, and what
 * the native data plane answers when it cannot hand a call to this process. One definition for the
 * gateway (gateway.ts) and for the data plane's test vectors (hack/dataplane-vectors.ts), which hold the
 * Rust data plane's bytes to these.
 */
import { ApiError, ErrorCode } from '../shared/errors.ts';

/** A call that arrives while the gateway drains (503, with `Retry-After` and `Connection: close`). */
export function shuttingDown(retryAfterSeconds: number): ApiError {
  return new ApiError(ErrorCode.ShuttingDown, 'the gateway is shutting down; retry', {
    retryAfter: retryAfterSeconds,
  });
}

/** Why the native data plane could not hand a call to Node (design §3). */
export const HandoffFailure = {
  /** Nothing listens on the hand-off socket: nothing was sent. */
  Refused: 'refused',
  /** No answer head within the hand-off bound. */
  Timeout: 'timeout',
  /** Node closed the connection before an answer head. */
  Closed: 'closed',
} as const;
export type HandoffFailure = (typeof HandoffFailure)[keyof typeof HandoffFailure];

/**
 * The native data plane's answer when the hand-off failed. Written by the Rust data plane only (Node
 * never answers it: in node mode a dead Node is a dead port); defined here so its bytes have one source.
 * Only `refused` says to retry (nothing was sent). After a `timeout` or a `closed` connection the call
 * may have run, so there is no `Retry-After`: a retry could run it twice, and the caller decides, as
 * after a connection cut by a gateway that dies in node mode.
 */
export function gatewayUnavailable(reason: HandoffFailure, retryAfterSeconds: number): ApiError {
  if (reason === HandoffFailure.Refused)
    return new ApiError(ErrorCode.GatewayUnavailable, 'the gateway cannot take the call now; retry', {
      details: { reason },
      retryAfter: retryAfterSeconds,
    });
  return new ApiError(
    ErrorCode.GatewayUnavailable,
    'the gateway lost the call before its answer; it may have run',
    { details: { reason } },
  );
}
