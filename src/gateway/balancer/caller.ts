/**
 * The AppCaller the gateway and the run worker share: take a slot on a replica (balancer), send the
 * call there, and treat an answer that proves the function did not run — a refused connection, or a
 * runtime's `X-Apphost-Refused` 429/503 — as "try another replica". The slot is held until the
 * response body closes, so a stream holds it until it ends.
 */
import { finished } from 'node:stream/promises';
import type { Dispatcher } from 'undici';
import { effectiveScaling } from '../../apis/v1alpha1/scaling.ts';
import type {
  AppCall,
  AppCaller,
  AppResponse,
  ResolvedApp,
  StartFailure,
} from '../../shared/contracts/seams.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { dispatchUpstream } from '../../shared/http/upstream-dispatch.ts';
import type { Balancer } from './balancer.ts';
import { type Attempt, placeCall, REFUSED_HEADER, Refusal } from './place.ts';
import type { AppPool, Lease } from './pool.ts';

/** Connection failures where nothing reached the app (so retrying cannot run the function twice). */
const NOT_CONNECTED = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** The refusal an answer carries, if any. */
export function refusalOf(res: Pick<AppResponse, 'statusCode' | 'headers'>): Refusal | undefined {
  const raw = res.headers[REFUSED_HEADER];
  const value = (Array.isArray(raw) ? raw[0] : raw)?.trim().toLowerCase();
  if (res.statusCode === 429 && value === Refusal.AtCapacity) return Refusal.AtCapacity;
  if (res.statusCode === 503 && value === Refusal.ShuttingDown) return Refusal.ShuttingDown;
  return undefined;
}

/** The connection error code when a call failed before anything was sent, else undefined. */
export function notConnected(err: unknown): string | undefined {
  if (!(err instanceof ApiError) || err.code !== ErrorCode.UpstreamUnreachable) return undefined;
  const reason = err.details?.reason;
  return typeof reason === 'string' && NOT_CONNECTED.has(reason) ? reason : undefined;
}

export interface AppCallerDeps {
  balancer: Balancer;
  dispatcher: Dispatcher;
  /**
   * True when the resolver reports replicas (EndpointSlices, local processes); false routes every call
   * to `ResolvedApp.upstream` as the app's single replica (e.g. through its Service).
   */
  replicasReported: boolean;
}

/** The limits of an app without a scaling spec. */
const DEFAULT_SCALING = effectiveScaling(undefined);

const sameFailure = (a: StartFailure | undefined, b: StartFailure | undefined) =>
  a === b || (a !== undefined && b !== undefined && a.reason === b.reason && a.message === b.message);

export function createAppCaller(deps: AppCallerDeps): AppCaller {
  const { balancer } = deps;
  // Without reported replicas, what each pool was last told of its app (its one upstream, readiness
  // and start failure): the usual call has nothing new to tell it.
  const told = new WeakMap<AppPool, Pick<ResolvedApp, 'upstream' | 'ready' | 'startFailure'>>();
  const poolOf = (app: ResolvedApp) => {
    const pool = balancer.pool(app.projectId, app.appName, app.scaling ?? DEFAULT_SCALING);
    if (!deps.replicasReported) {
      const last = told.get(pool);
      if (
        !last ||
        last.upstream !== app.upstream ||
        last.ready !== app.ready ||
        !sameFailure(last.startFailure, app.startFailure)
      ) {
        balancer.setReplicas(
          app.projectId,
          app.appName,
          app.ready ? [{ id: app.upstream, url: app.upstream }] : [],
        );
        balancer.setStartFailure(app.projectId, app.appName, app.startFailure);
        told.set(pool, { upstream: app.upstream, ready: app.ready, startFailure: app.startFailure });
      }
    }
    return pool;
  };
  const dispatch = (call: AppCall, lease: Lease) =>
    dispatchUpstream({ ...call, dispatcher: deps.dispatcher, upstream: lease.replica.url });
  /** An answer the app took (the call is the caller's now): the slot is held until its body closes. */
  const taken = (res: AppResponse, lease: Lease): AppResponse => {
    const { body } = res;
    if (!body || body.destroyed || body.closed) lease.release();
    else body.once('close', () => lease.release());
    return res;
  };
  /** The attempt's outcome when the replica refused or could not be reached; rethrows any other failure. */
  const refusedBy = async (res: AppResponse): Promise<Attempt<AppResponse>> => {
    // Read to its end (bounded by the call's body timeout and signal) so the connection is reused.
    if (res.body) await finished(res.body.resume()).catch(() => undefined);
    return { refused: refusalOf(res) as Refusal };
  };
  const unreachable = (call: AppCall, err: unknown): Attempt<AppResponse> => {
    const code = notConnected(err);
    if (code && !call.signal?.aborted) return { refused: Refusal.Unreachable, detail: code };
    throw err;
  };
  /**
   * Through placeCall: a slot from the queue, and the retries after a refusal. `firstTry`, when given,
   * is what the attempt on `first` already gave.
   */
  const place = async (
    pool: AppPool,
    call: AppCall,
    first: Lease | undefined,
    firstTry?: Attempt<AppResponse>,
  ): Promise<AppResponse> => {
    let known = firstTry;
    const attempt = async (lease: Lease): Promise<Attempt<AppResponse>> => {
      if (known) {
        const a = known;
        known = undefined;
        return a;
      }
      let res: AppResponse;
      try {
        res = await dispatch(call, lease);
      } catch (err) {
        return unreachable(call, err);
      }
      return refusalOf(res) ? refusedBy(res) : { value: res };
    };
    const { value: res, lease } = await placeCall(pool, balancer.settings, attempt, {
      ...(call.signal ? { signal: call.signal } : {}),
      ...(first ? { first } : {}),
      // A handed-off call's deadline: its waits in the queue are at the head, bounded by it.
      ...(call.deadline !== undefined ? { deadline: call.deadline } : {}),
    });
    return taken(res, lease);
  };
  /**
   * With a slot already taken (the usual call) the first attempt is made here, without placeCall's
   * promises and objects: only a refusal, or a connection that could not be made, goes on to it.
   */
  const send = (pool: AppPool, call: AppCall, first: Lease | undefined): Promise<AppResponse> => {
    if (!first) return place(pool, call, undefined);
    return dispatch(call, first).then(
      (res) => (refusalOf(res) ? refusedBy(res).then((a) => place(pool, call, first, a)) : taken(res, first)),
      (err: unknown) => {
        let a: Attempt<AppResponse>;
        try {
          a = unreachable(call, err);
        } catch (e) {
          first.release();
          throw e;
        }
        return place(pool, call, first, a);
      },
    );
  };
  const caller = ((app: ResolvedApp, call: AppCall) => {
    try {
      const pool = poolOf(app);
      // A free slot is taken at once (no promise for the queue): the usual call.
      return send(pool, call, call.signal?.aborted ? undefined : pool.tryAcquire());
    } catch (err) {
      return Promise.reject(err);
    }
  }) as AppCaller;
  caller.reserve = async (app, signal) => {
    const pool = poolOf(app);
    const lease = await pool.acquire(signal ? { signal } : {});
    let used = false;
    return {
      call: (call) => {
        if (used) throw new Error('a slot is used once');
        used = true;
        return send(pool, call, lease);
      },
      release: () => {
        if (!used) lease.release();
        used = true;
      },
    };
  };
  return caller;
}
