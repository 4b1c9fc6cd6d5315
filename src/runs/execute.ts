/**
 * One execution of an async run: call the app, bounded by its response grace period, abortable by a
 * cancel or a stopping worker, and turn what happened into a RunOutcome.
 */
import type { Dispatcher } from 'undici';
import type { CallAbort } from '../shared/call-abort.ts';
import type { RunJob } from '../shared/contracts/messaging.ts';
import type { AppCall, AppResolver, AppResponse } from '../shared/contracts/seams.ts';
import { ApiError } from '../shared/errors.ts';
import { callUpstream } from '../shared/http/upstream.ts';
import { graceMs, type RunOutcome } from './outcome.ts';

export const TIMEOUT = Symbol('timeout');
export const CANCEL = Symbol('cancel');
export const SHUTDOWN = Symbol('shutdown');
export type AbortReason = typeof TIMEOUT | typeof CANCEL | typeof SHUTDOWN;

export interface ExecuteDeps {
  resolver: AppResolver;
  dispatcher: Dispatcher;
  /** Sends the call on a replica slot the worker reserved (the balancer); else straight to the app's upstream. */
  send?: (call: AppCall) => Promise<AppResponse>;
  /** Larger response bodies are not kept whole (neither forwarded to a webhook nor kept as the result). */
  maxKeptBodyBytes: number;
}

/** Calls the app; undefined when abandoned because the worker is stopping. */
export async function executeRun(
  job: RunJob,
  abort: CallAbort,
  deps: ExecuteDeps,
): Promise<RunOutcome | undefined> {
  const bound = graceMs(job);
  const timer = setTimeout(() => abort.abort(TIMEOUT), bound);
  const reason = (): AbortReason | undefined => (abort.aborted ? (abort.reason as AbortReason) : undefined);
  // undici's request API (no balancer) needs a real AbortSignal: one follows the switch only then.
  let bridge: { signal: AbortSignal; stop(): void } | undefined;
  try {
    if (abort.aborted) throw abort.reason;
    const call: AppCall = {
      path: job.path,
      query: job.query,
      headers: job.headers,
      body: Buffer.from(job.bodyBase64, 'base64'),
      signal: abort,
      headersTimeoutMs: bound,
      bodyTimeoutMs: 0,
      // An answer that is kept whole anyway comes whole (no body stream), through the balancer.
      wholeUpTo: deps.maxKeptBodyBytes,
    };
    let res: AppResponse;
    if (deps.send) res = await deps.send(call);
    else {
      const app = await deps.resolver.resolve(job.projectId, job.appName);
      if (!app) {
        return {
          state: 'failure',
          error: { code: 'not_found', message: `app "${job.appName}" no longer exists` },
        };
      }
      bridge = abortSignalOf(abort);
      res = await callUpstream({
        ...call,
        signal: bridge.signal,
        dispatcher: deps.dispatcher,
        upstream: app.upstream,
      });
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body ?? [res.whole]) {
      // Reads to the end (the size is recorded) but keeps only what the webhook or the result can use,
      // plus the chunk that crosses the bound.
      if (size <= deps.maxKeptBodyBytes) chunks.push(chunk as Buffer);
      size += (chunk as Buffer).length;
    }
    const contentType = res.headers['content-type'];
    const ok = res.statusCode >= 200 && res.statusCode < 300;
    return {
      state: ok ? 'success' : 'failure',
      status: res.statusCode,
      ...(typeof contentType === 'string' ? { contentType } : {}),
      body: Buffer.concat(chunks),
      size,
      ...(ok ? {} : { error: { code: 'function_failed', message: `the app answered ${res.statusCode}` } }),
    };
  } catch (err) {
    const why = reason();
    if (why === SHUTDOWN) return undefined;
    if (why === CANCEL) return { state: 'cancelled' };
    if (why === TIMEOUT) {
      return {
        state: 'timeout',
        error: {
          code: 'timeout',
          message: `the run exceeded the app's response grace period of ${bound / 1000} s`,
        },
      };
    }
    if (err instanceof ApiError) return { state: 'failure', error: { code: err.code, message: err.message } };
    return { state: 'failure', error: { code: 'internal', message: (err as Error)?.message ?? 'error' } };
  } finally {
    clearTimeout(timer);
    bridge?.stop();
  }
}

/** An AbortSignal aborted with the switch's reason when the switch is. */
function abortSignalOf(abort: CallAbort): { signal: AbortSignal; stop(): void } {
  const ac = new AbortController();
  const follow = () => ac.abort(abort.reason);
  if (abort.aborted) follow();
  else abort.addEventListener('abort', follow);
  return { signal: ac.signal, stop: () => abort.removeEventListener('abort', follow) };
}
