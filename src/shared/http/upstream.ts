/**
 * Calling an app: which headers and query parameters reach it, and one undici request with the
 * failure modes mapped to the error taxonomy (refused → 502, too slow → 504). Used by the gateway's
 * sync/stream handlers and by the run worker.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { CallSignal } from '../contracts/seams.ts';
import { ApiError, ErrorCode } from '../errors.ts';

/**
 * The native data plane's hand-off marker (docs/design/native-data-plane.md §3): honoured only on the
 * hand-off socket (src/gateway/dataplane/handoff.ts), and never forwarded to an app from either data plane.
 */
export const HANDOFF_HEADER = 'x-apphost-handoff';

/**
 * Hop-by-hop and proxy-owned request headers never forwarded (RFC 9110 §7.6.1, plus our own secrets
 * and the hand-off marker).
 */
const DROP_REQUEST = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'http2-settings',
  'host',
  'content-length',
  'expect',
  'authorization',
  'x-webhook-secret',
  'x-request-id',
  HANDOFF_HEADER,
]);

/** Response headers the gateway sets itself or that describe the upstream hop only. */
const DROP_RESPONSE = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'http2-settings',
  'x-request-id',
  'content-length',
]);

/** Our own query parameters, consumed by the gateway. */
export const GATEWAY_QUERY_PARAMS = ['async', 'webhookEndpoint'] as const;

const NONE_LISTED: ReadonlySet<string> = new Set();

function connectionListed(headers: IncomingHttpHeaders): ReadonlySet<string> {
  const raw = headers.connection;
  if (raw === undefined) return NONE_LISTED;
  const list = Array.isArray(raw) ? raw.join(',') : (raw ?? '');
  return new Set(
    list
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  );
}

/** Headers to send the app: the caller's end-to-end headers plus `X-Request-Id`. */
export function forwardRequestHeaders(
  incoming: IncomingHttpHeaders,
  requestId: string,
): Record<string, string> {
  const listed = connectionListed(incoming);
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(incoming)) {
    const n = name.toLowerCase();
    if (value === undefined || DROP_REQUEST.has(n) || listed.has(n)) continue;
    out[n] = Array.isArray(value) ? value.join(', ') : value;
  }
  out['x-request-id'] = requestId;
  return out;
}

/** Headers of the app's response to pass back to the caller. */
export function forwardResponseHeaders(upstream: IncomingHttpHeaders): Record<string, string | string[]> {
  const listed = connectionListed(upstream);
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(upstream)) {
    const n = name.toLowerCase();
    if (value === undefined || DROP_RESPONSE.has(n) || listed.has(n)) continue;
    out[n] = value;
  }
  return out;
}

/** The query string to forward ('' or without the leading '?'), minus `async` and `webhookEndpoint`. */
export function forwardQuery(search: string): string {
  if (search === '' || search === '?') return '';
  const params = new URLSearchParams(search.startsWith('?') ? search.slice(1) : search);
  for (const p of GATEWAY_QUERY_PARAMS) params.delete(p);
  return params.toString();
}

/** Rejects paths that would climb out of the app's namespace once the upstream normalises them. */
export function checkForwardPath(path: string): void {
  // Nothing to decode and no dot or backslash: nothing to refuse (the usual path).
  if (!path.includes('%') && !path.includes('.') && !path.includes('\\')) return;
  for (const seg of path.split('/')) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(seg);
    } catch {
      throw new ApiError(ErrorCode.BadRequest, 'path is not valid percent-encoding');
    }
    if (decoded === '..' || decoded === '.' || decoded.includes('/') || decoded.includes('\\')) {
      throw new ApiError(ErrorCode.BadRequest, 'path must not contain dot segments or encoded slashes');
    }
  }
}

export interface UpstreamCall {
  dispatcher: Dispatcher;
  /** Base URL of the app, no trailing slash. */
  upstream: string;
  /** Path after `/v4/<project>/<app>/`, without a leading slash. */
  path: string;
  query: string;
  headers: Record<string, string>;
  body: Buffer;
  signal?: AbortSignal;
  /** Bound on waiting for the response head. */
  headersTimeoutMs: number;
  /** Bound on silence between body chunks (0 = none; the caller's signal bounds it instead). */
  bodyTimeoutMs: number;
}

/** Upstream base URLs parsed once (a process calls a few apps' replicas; bounded anyway). */
const parsedUpstreams = new Map<string, { origin: string; basePath: string }>();
const PARSED_UPSTREAMS_MAX = 4096;

function parseUpstream(upstream: string): { origin: string; basePath: string } {
  let p = parsedUpstreams.get(upstream);
  if (!p) {
    const url = new URL(upstream);
    p = { origin: url.origin, basePath: url.pathname.replace(/\/$/, '') };
    if (parsedUpstreams.size >= PARSED_UPSTREAMS_MAX) parsedUpstreams.clear();
    parsedUpstreams.set(upstream, p);
  }
  return p;
}

/** The undici request for a call (without its signal). */
export function upstreamRequest(call: Omit<UpstreamCall, 'signal'>): Dispatcher.DispatchOptions {
  const { origin, basePath } = parseUpstream(call.upstream);
  return {
    origin,
    path: `${basePath}/${call.path}${call.query ? `?${call.query}` : ''}`,
    method: 'POST',
    headers: call.headers,
    body: call.body,
    headersTimeout: call.headersTimeoutMs,
    bodyTimeout: call.bodyTimeoutMs,
  };
}

export async function callUpstream(call: UpstreamCall): Promise<Dispatcher.ResponseData> {
  try {
    return await call.dispatcher.request({ ...upstreamRequest(call), signal: call.signal ?? null });
  } catch (err) {
    throw upstreamError(err, call.signal);
  }
}

/** Whether a Content-Type is a server-sent event stream (passed on as it comes, never buffered). */
export function isEventStream(contentType: string | undefined): boolean {
  return contentType?.toLowerCase().startsWith('text/event-stream') ?? false;
}

/** Maps an undici failure to 502/504; an abort by our own signal is rethrown as is. */
export function upstreamError(err: unknown, signal?: CallSignal): unknown {
  if (signal?.aborted) return signal.reason ?? err;
  const code = (err as { code?: string })?.code ?? '';
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new ApiError(ErrorCode.UpstreamTimeout, 'the app did not answer in time', { cause: err });
  }
  return new ApiError(ErrorCode.UpstreamUnreachable, 'the app could not be reached', {
    cause: err,
    details: { reason: code || (err as Error)?.name || 'error' },
  });
}
