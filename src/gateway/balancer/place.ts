/**
 * Placing one call: take a slot on a replica, make the attempt, and when the replica's answer proves
 * the function did not run (the runtime's "at capacity" or "shutting down" refusal, a refused
 * connection), give the slot back and try another replica — bounded by the queue wait and, for
 * replicas that are going away, by `maxRetries`. The caller never sees a replica's refusal, only the
 * platform's own errors.
 */
import type { CallSignal } from '../../shared/contracts/seams.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import type { BalancerSettings } from './balancer.ts';
import type { AppPool, Lease } from './pool.ts';

export const Refusal = {
  /** The runtime's own concurrency limit (another gateway filled the replica): 429. */
  AtCapacity: 'at_capacity',
  /** The replica is draining: 503. */
  ShuttingDown: 'shutting_down',
  /** No connection could be made (nothing was sent). */
  Unreachable: 'unreachable',
} as const;
export type Refusal = (typeof Refusal)[keyof typeof Refusal];

/** Response header with which a runtime says it refused a call without running it. */
export const REFUSED_HEADER = 'x-apphost-refused';

export type Attempt<T> = { value: T } | { refused: Refusal; detail?: string };

/**
 * Runs `attempt` on a replica until one takes the call (on `first` first, a slot already taken). On
 * `{value}` the lease stays held: the caller releases it when the call is over (the end of a stream).
 * If `attempt` throws, the lease is released.
 */
export async function placeCall<T>(
  pool: AppPool,
  s: Pick<
    BalancerSettings,
    'capacityBlockMs' | 'unreachableBlockMs' | 'maxRetries' | 'queueTimeoutMs' | 'retryAfterSeconds'
  >,
  attempt: (lease: Lease) => Promise<Attempt<T>>,
  opts: {
    signal?: CallSignal;
    now?: () => number;
    first?: Lease;
    /** Epoch ms: the call waits at the head of the queue up to this, from its first try (AppCall.deadline). */
    deadline?: number;
  } = {},
): Promise<{ value: T; lease: Lease }> {
  const now = opts.now ?? Date.now;
  let retries = 0;
  let deadline: number | undefined = opts.deadline;
  let last: { refused: Refusal; detail?: string } | undefined;
  let first = opts.first;
  for (;;) {
    const lease =
      first ??
      (await pool.acquire({
        ...(opts.signal ? { signal: opts.signal } : {}),
        ...(deadline !== undefined ? { requeue: { deadline } } : {}),
      }));
    first = undefined;
    let result: Attempt<T>;
    try {
      result = await attempt(lease);
    } catch (err) {
      lease.release();
      throw err;
    }
    if ('value' in result) return { value: result.value, lease };
    last = result;
    const capacity = result.refused === Refusal.AtCapacity;
    lease.refuse(capacity ? s.capacityBlockMs : s.unreachableBlockMs, result.refused);
    if (!capacity && ++retries > s.maxRetries) throw gaveUp(pool.app, last, retries, s.retryAfterSeconds);
    deadline ??= now() + s.queueTimeoutMs;
    if (now() >= deadline) throw gaveUp(pool.app, last, retries, s.retryAfterSeconds);
  }
}

/** The error of a call no replica took (exported for hack/dataplane-vectors.ts). */
export function gaveUp(
  app: string,
  last: { refused: Refusal; detail?: string },
  tries: number,
  retryAfter: number,
) {
  const details = { reason: last.refused, ...(last.detail ? { detail: last.detail } : {}) };
  if (last.refused === Refusal.Unreachable) {
    return new ApiError(ErrorCode.UpstreamUnreachable, `app "${app}" could not be reached (${tries} tries)`, {
      details,
    });
  }
  if (last.refused === Refusal.AtCapacity) {
    return new ApiError(
      ErrorCode.QueueTimeout,
      `no replica of app "${app}" accepted the call in time; retry later`,
      {
        retryAfter,
        details,
      },
    );
  }
  return new ApiError(
    ErrorCode.AppNotReady,
    `the replicas of app "${app}" tried (${tries}) were shutting down; retry`,
    {
      retryAfter,
      details,
    },
  );
}
