/**
 * Node's end of the native data plane's hand-off (docs/design/native-data-plane.md §3): an HTTP server
 * on a unix socket to which the data plane sends, whole, every call it does not answer itself, with a
 * marker header
 *
 *   X-Apphost-Handoff: v=1; id=<request id>; start=<epoch ms>; reason=<reason>[; deadline=<epoch ms>]
 *
 * The marker is parsed strictly (`parseHandoffMarker`), stripped, counted by reason, and the call goes
 * to the gateway's callback carrying the data plane's id, start and queue deadline (dataplane/handed-off.ts),
 * so that the answer, the access line and the sync-call record are the ones of the call the data plane
 * took. A call without a valid marker is answered 400 with a JSON body and logged: it means the data
 * plane and Node disagree, which must be seen, not guessed around.
 * The marker is honoured only here; on the gateway's TCP port it is one more caller header, never
 * forwarded to an app (DROP_REQUEST in shared/http/upstream.ts).
 */
import { randomUUID } from 'node:crypto';
import { chmodSync, lstatSync, unlinkSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { connect } from 'node:net';
import { Counter, type Registry } from 'prom-client';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { HANDOFF_HEADER } from '../../shared/http/upstream.ts';
import type { Logger } from '../../shared/log.ts';
import { HANDED_OFF, type HandedOffCall, type HandedOffRequest } from './handed-off.ts';

/** Why the data plane handed a call over: a closed set, and the label of the hand-off counter. */
export const HANDOFF_REASONS = [
  'async',
  'webhook',
  'token_miss',
  /** The app has no ready replica, or its replicas went to zero while the call waited in the data plane's queue. */
  'no_replica',
  'refused_check',
  'body_over_limit',
  'unknown_app',
  'domain',
  /** Step 4: every call; step 5: a path, method or Host the fast path does not serve (Node's 404/405/400). */
  'not_served',
] as const;
export type HandoffReason = (typeof HANDOFF_REASONS)[number];

/** The marker's version this gateway speaks (`v=`). */
export const HANDOFF_MARKER_VERSION = 1;

/** Bound on finding out whether a socket file left at `path` still has a server behind it. */
export const HANDOFF_STALE_CHECK_TIMEOUT_MS = 1_000;
/** Default bound on `close()` waiting for handed-off calls in flight; then their connections are cut. */
export const HANDOFF_CLOSE_TIMEOUT_MS = 5_000;
/**
 * How long the server keeps an idle connection of the data plane's pool: longer than the data plane
 * keeps one (HANDOFF_POOL_IDLE_MS in native/dataplane/src/handoff.rs, 4 s), so that the data plane, not
 * Node, retires it, and never sends a request on a connection Node is closing.
 */
export const HANDOFF_KEEP_ALIVE_TIMEOUT_MS = 5_000;

/**
 * How long a connection Node closes after an answer that says `Connection: close` (a 413 decided from
 * `Content-Length`, before the body was read) goes on reading, and dropping, what the data plane still
 * sends of the body. node:http would close at once: the data plane's next body write then fails, and
 * hyper's client may report that failure instead of the answer it has already received: 7 of 300
 * over-limit calls were answered 503 `gateway_unavailable` instead of 413. This is nginx's lingering close,
 * for the same reason. The data plane closes its end once it has the answer and its body is sent.
 */
export const HANDOFF_LINGER_MS = 2_000;

export interface HandoffMarker extends HandedOffCall {
  reason: HandoffReason;
}

/** Why a marker was refused: `problem` is a stable tag, `message` says what was expected. */
export interface HandoffMarkerError {
  problem: 'missing' | 'repeated' | 'syntax' | 'version' | 'id' | 'start' | 'reason' | 'deadline';
  message: string;
}

const REASONS: ReadonlySet<string> = new Set(HANDOFF_REASONS);
/** The data plane's request ids: UUIDs, lower-case hex (what `randomUUID` and Rust's uuid crate write). */
const REQUEST_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Epoch ms: decimal digits only (no sign, exponent, fraction or leading zero), a safe integer. */
const EPOCH_MS = /^(0|[1-9][0-9]{0,15})$/;
/** The fields, in this order; `deadline` may be left out. */
const FIELDS = ['v', 'id', 'start', 'reason', 'deadline'] as const;

const fail = (problem: HandoffMarkerError['problem'], message: string) => ({
  error: { problem, message } as HandoffMarkerError,
});
const epochMs = (s: string): number | undefined => {
  if (!EPOCH_MS.test(s)) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
};
/** A field's value as it may appear in a message: bounded, and JSON-quoted so nothing odd reaches a log raw. */
const shown = (s: string) => JSON.stringify(s.length > 64 ? `${s.slice(0, 64)}…` : s);

/**
 * Pure: the marker of a hand-off, from the header's value as node:http gives it (a repeated header is
 * joined with ", "). Strict: the fields `v`, `id`, `start`, `reason` and optionally `deadline`, in that
 * order, each once, separated by `;` with optional spaces or tabs around; `v` is 1, `id` a lower-case
 * UUID, `start` and `deadline` epoch ms (a deadline not before the start), `reason` one of
 * HANDOFF_REASONS. Anything else is an error saying which field is wrong.
 */
export function parseHandoffMarker(
  value: string | string[] | undefined,
): { marker: HandoffMarker; error?: undefined } | { marker?: undefined; error: HandoffMarkerError } {
  if (value === undefined || value === '') return fail('missing', `no ${HANDOFF_HEADER} header`);
  if (Array.isArray(value) || value.includes(','))
    return fail('repeated', `more than one ${HANDOFF_HEADER} header, or a "," in it`);
  const parts = value.split(';').map((p) => p.replace(/^[ \t]+|[ \t]+$/g, ''));
  if (parts.length < 4 || parts.length > 5)
    return fail(
      'syntax',
      `expected "v=1; id=…; start=…; reason=…[; deadline=…]", got ${parts.length} fields`,
    );
  const values: string[] = [];
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] ?? '';
    const eq = part.indexOf('=');
    const key = eq === -1 ? part : part.slice(0, eq);
    if (key !== FIELDS[i])
      return fail('syntax', `field ${i + 1} must be "${FIELDS[i]}=…", got ${shown(part)}`);
    values.push(part.slice(eq + 1));
  }
  const [v = '', id = '', start = '', reason = '', deadline] = values;
  if (v !== String(HANDOFF_MARKER_VERSION))
    return fail('version', `v must be ${HANDOFF_MARKER_VERSION}, got ${shown(v)}`);
  if (!REQUEST_ID.test(id)) return fail('id', `id must be a lower-case UUID, got ${shown(id)}`);
  const startedAt = epochMs(start);
  if (startedAt === undefined) return fail('start', `start must be epoch milliseconds, got ${shown(start)}`);
  if (!REASONS.has(reason))
    return fail('reason', `reason must be one of ${HANDOFF_REASONS.join(', ')}; got ${shown(reason)}`);
  const marker: HandoffMarker = { requestId: id, startedAt, reason: reason as HandoffReason };
  if (deadline !== undefined) {
    const at = epochMs(deadline);
    if (at === undefined || at < startedAt)
      return fail('deadline', `deadline must be epoch milliseconds not before start, got ${shown(deadline)}`);
    marker.deadline = at;
  }
  return { marker };
}

/** Pure: the marker's header value (what the data plane sends; the tests send it too). */
export function formatHandoffMarker(m: HandoffMarker): string {
  return (
    `v=${HANDOFF_MARKER_VERSION}; id=${m.requestId}; start=${m.startedAt}; reason=${m.reason}` +
    (m.deadline !== undefined ? `; deadline=${m.deadline}` : '')
  );
}

export interface HandoffServerOptions {
  /** The socket's path (`$APPHOST_GATEWAY_DATA_PLANE_DIR/handoff.sock`), in a folder only this user reaches. */
  path: string;
  /** The gateway's `callback()`: a handed-off call is served as any other, with the marker's id, start and deadline. */
  callback: (req: IncomingMessage, res: ServerResponse) => void;
  log: Logger;
  /** Where `apphost_gateway_dataplane_handoffs_total{reason}` is registered (the gateway's registry). */
  registry: Registry;
  /** Bound on `close()` waiting for calls in flight (default HANDOFF_CLOSE_TIMEOUT_MS). */
  closeTimeoutMs?: number;
}

export interface HandoffServer {
  readonly path: string;
  readonly server: Server;
  /**
   * Stops accepting, waits for handed-off calls in flight up to `closeTimeoutMs`, then cuts what is
   * left; the socket file is removed.
   */
  close(): Promise<void>;
}

/** The hand-off counter, registered once per registry. */
function handoffCounter(registry: Registry): Counter<'reason'> {
  const name = 'apphost_gateway_dataplane_handoffs_total';
  const existing = registry.getSingleMetric(name);
  if (existing) return existing as Counter<'reason'>;
  const c = new Counter({
    name,
    help: 'Calls the native data plane handed to Node, by why (docs/design/native-data-plane.md §3).',
    labelNames: ['reason'],
    registers: [registry],
  });
  // Every reason is a series from the start, so a rate over it never starts from nothing.
  for (const reason of HANDOFF_REASONS) c.inc({ reason }, 0);
  return c;
}

/**
 * A socket file at `path`: none (fine), one no server answers on (stale, removed), one a server answers
 * on (refused: another gateway uses it), or not a socket (refused: never delete what is not ours).
 */
async function clearStaleSocket(path: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = lstatSync(path).isSocket();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (!isSocket) throw new Error(`${path} exists and is not a socket; not removing it`);
  const live = await new Promise<boolean>((resolve) => {
    const sock = connect(path);
    const timer = setTimeout(() => {
      sock.destroy();
      resolve(true); // a server that does not answer within the bound may still be alive: do not steal it
    }, HANDOFF_STALE_CHECK_TIMEOUT_MS);
    sock.once('connect', () => {
      clearTimeout(timer);
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
  if (live) throw new Error(`another server is listening on ${path}`);
  unlinkSync(path);
}

/**
 * `server` listening on the socket file `path`, mode 0600: a stale file left by a dead process is removed
 * first; a live one, or a file that is not a socket, is refused.
 */
export async function listenOnSocketFile(server: Server, path: string): Promise<void> {
  await clearStaleSocket(path);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ path }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // The folder keeps others out meanwhile (an emptyDir, or a temp dir of mode 0700); then the socket too.
  try {
    chmodSync(path, 0o600);
  } catch (err) {
    server.close();
    throw err;
  }
}

/** Listens on `opts.path` (mode 0600) and serves handed-off calls until `close()`. */
export async function serveHandoff(opts: HandoffServerOptions): Promise<HandoffServer> {
  const { path, callback, log } = opts;
  const handoffs = handoffCounter(opts.registry);
  const closeTimeoutMs = opts.closeTimeoutMs ?? HANDOFF_CLOSE_TIMEOUT_MS;

  // requireHostHeader off: the data plane passes the caller's Host on as it came and makes none up, so
  // an HTTP/1.0 caller's call without one arrives here as HTTP/1.1 without one. Node's default would
  // answer it a bare 400 the gateway's own port never gives it (only custom domains read the Host).
  const server = createServer({ requireHostHeader: false }, (req, res) => {
    const { marker, error } = parseHandoffMarker(req.headers[HANDOFF_HEADER]);
    if (error) {
      const id = randomUUID();
      log.warn(
        { requestId: id, problem: error.problem, method: req.method },
        `hand-off refused: ${error.message}`,
      );
      const body = JSON.stringify(
        new ApiError(ErrorCode.BadRequest, `invalid ${HANDOFF_HEADER} marker: ${error.message}`, {
          details: { problem: error.problem },
        }).toBody(),
      );
      res.writeHead(400, {
        'Content-Type': 'application/json; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
        'X-Request-Id': id,
      });
      res.end(body);
      return;
    }
    delete req.headers[HANDOFF_HEADER];
    handoffs.inc({ reason: marker.reason });
    const call: HandedOffCall = { requestId: marker.requestId, startedAt: marker.startedAt };
    if (marker.deadline !== undefined) call.deadline = marker.deadline;
    (req as HandedOffRequest)[HANDED_OFF] = call;
    callback(req, res);
  });

  server.keepAliveTimeout = HANDOFF_KEEP_ALIVE_TIMEOUT_MS;
  // node:http ends a `Connection: close` answer's connection with destroySoon(): half-close instead, read
  // on (the parser drops the rest of the dumped body) until the data plane closes its end or the bound.
  server.on('connection', (socket: Socket) => {
    socket.destroySoon = function lingeringClose(this: Socket) {
      this.end();
      const timer = setTimeout(() => this.destroy(), HANDOFF_LINGER_MS);
      timer.unref();
      this.once('end', () => this.destroy());
      this.once('close', () => clearTimeout(timer));
    };
  });
  await listenOnSocketFile(server, path);
  log.info({ path }, 'hand-off socket listening');

  let closing: Promise<void> | undefined;
  return {
    path,
    server,
    close() {
      closing ??= new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          log.warn({ path }, 'hand-off close bound passed: cutting calls still in flight');
          server.closeAllConnections();
        }, closeTimeoutMs);
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
      });
      return closing;
    },
  };
}
