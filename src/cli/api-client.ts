/**
 * HTTP calls from the CLI to the management API and the run API. Every call is bounded until its
 * response headers arrive (APPHOST_TIMEOUT_SECONDS); a streamed body then runs until it ends or the
 * caller's signal fires. Failures become CliErrors that say what to do next.
 */
import { CliError } from '../shared/cli/command.ts';
import type { Connection } from './connection.ts';

export interface ApiClientDeps {
  conn: Connection;
  timeoutMs: number;
  /** Aborts every call (Ctrl-C). */
  signal?: AbortSignal;
  fetch?: typeof fetch;
}

export interface ApiErrorBody {
  error?: { code?: string; message?: string; [k: string]: unknown };
}

export interface RequestOptions {
  method?: string;
  query?: Record<string, string | number | boolean | undefined>;
  /** JSON (an object or a string), or raw bytes (Uint8Array, or a stream of them) with their Content-Type in `headers`. */
  body?: unknown;
  headers?: Record<string, string>;
  /** Service-account token by default; `run` uses the run token. */
  token?: string;
  /** The management API by default. */
  base?: string;
  /** Bound until the response headers arrive, instead of the default (a long upload). */
  timeoutMs?: number;
}

export interface ApiClient {
  readonly conn: Connection;
  /** Management API path under `/v2/projects/{project}`. */
  projectPath(...segments: string[]): string;
  /** A JSON call; resolves to the parsed body of a 2xx answer. */
  json<T>(path: string, opts?: RequestOptions): Promise<T>;
  /** A call whose 2xx response is returned unread (streams); non-2xx becomes a CliError. */
  open(path: string, opts?: RequestOptions): Promise<Response>;
}

function where(conn: Connection): string {
  return conn.profile ? ` (profile '${conn.profile}' of ${conn.configFile})` : '';
}

/** What to do about an HTTP error status. */
export function hintFor(status: number, code: string | undefined, conn: Connection): string | undefined {
  if (status === 401)
    return `check the token${where(conn)}: restart 'apphost dev' (it writes a fresh one) or run 'apphost login'`;
  if (status === 404 && code === 'not_found') return undefined;
  if (status === 503) return 'the server is starting or busy: try again in a few seconds';
  return undefined;
}

export async function errorFromResponse(res: Response, conn: Connection): Promise<CliError> {
  const text = await res.text().catch(() => '');
  let body: ApiErrorBody | undefined;
  try {
    body = JSON.parse(text) as ApiErrorBody;
  } catch {
    // not JSON
  }
  const code = body?.error?.code;
  const message = body?.error?.message ?? (text.slice(0, 200) || res.statusText);
  return new CliError(`${res.status}${code ? ` ${code}` : ''}: ${message}`, hintFor(res.status, code, conn));
}

export function createApiClient(deps: ApiClientDeps): ApiClient {
  const { conn } = deps;
  const doFetch = deps.fetch ?? fetch;

  async function open(path: string, opts: RequestOptions = {}): Promise<Response> {
    const base = opts.base ?? conn.baseUrl;
    const url = new URL(base + path);
    for (const [k, v] of Object.entries(opts.query ?? {}))
      if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = {
      authorization: `Bearer ${opts.token ?? conn.token}`,
      ...opts.headers,
    };
    let body: string | Uint8Array | ReadableStream<Uint8Array> | undefined;
    if (opts.body instanceof Uint8Array || opts.body instanceof ReadableStream) {
      // Raw bytes (a bundle upload): the caller says what they are in `headers`.
      body = opts.body;
    } else if (opts.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    }
    // Bounded until the headers arrive; a streamed body is bounded only by the caller's signal.
    const ac = new AbortController();
    const timeoutMs = opts.timeoutMs ?? deps.timeoutMs;
    const timer = setTimeout(() => ac.abort(new Error('timeout')), timeoutMs);
    const onAbort = () => ac.abort(deps.signal?.reason);
    deps.signal?.addEventListener('abort', onAbort, { once: true });
    let res: Response;
    try {
      res = await doFetch(url, {
        method: opts.method ?? 'GET',
        headers,
        ...(body !== undefined ? { body } : {}),
        // A streamed body (upload progress) needs half duplex.
        ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
        signal: ac.signal,
      } as RequestInit);
    } catch (err) {
      deps.signal?.removeEventListener('abort', onAbort);
      if (deps.signal?.aborted) throw err;
      if (ac.signal.aborted)
        throw new CliError(
          `${url.origin} did not answer within ${timeoutMs / 1000} s`,
          'check that the server is up, or raise APPHOST_TIMEOUT_SECONDS',
        );
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new CliError(
        `cannot reach ${url.origin}: ${cause?.code ?? cause?.message ?? (err as Error).message}`,
        `is the server running? ${base === conn.baseUrl ? 'the base URL' : 'the API URL'} comes from --${base === conn.baseUrl ? 'base-url' : 'api-url'}, APPHOST_${base === conn.baseUrl ? 'BASE' : 'API'}_URL or the config file${where(conn)}; 'apphost dev' writes it when it starts`,
      );
    } finally {
      clearTimeout(timer);
    }
    if (res.status < 200 || res.status > 299) {
      deps.signal?.removeEventListener('abort', onAbort);
      throw await errorFromResponse(res, conn);
    }
    return res;
  }

  return {
    conn,
    projectPath: (...segments) =>
      `/v2/projects/${encodeURIComponent(conn.project)}${segments.map((s) => `/${encodeURIComponent(s)}`).join('')}`,
    open,
    async json<T>(path: string, opts: RequestOptions = {}): Promise<T> {
      const res = await open(path, opts);
      const text = await res.text();
      try {
        return (text ? JSON.parse(text) : {}) as T;
      } catch {
        throw new CliError(`${res.url} answered ${res.status} with a body that is not JSON`);
      }
    },
  };
}
