/**
 * The shared test vectors of the native data plane (docs/design/native-data-plane.md §7): runs the
 * gateway's own TypeScript rules on a fixed corpus (edge cases and a seeded random one) and writes what
 * they answer to native/dataplane/tests/vectors/*.json, which the Rust modules' tests read. A TS rule
 * changed without regenerating fails `make lint`, which runs this with --check.
 *
 *   node hack/dataplane-vectors.ts           write the files
 *   node hack/dataplane-vectors.ts --check   exit 1, naming each file that differs from what the rules give now
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { type IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { AggregatorRegistry, Registry } from 'prom-client';
import { DEFAULT_BALANCER_SETTINGS, poolSettingsFor } from '../src/gateway/balancer/balancer.ts';
import { notConnected, refusalOf } from '../src/gateway/balancer/caller.ts';
import { ConcurrencyMeter } from '../src/gateway/balancer/meter.ts';
import { createBalancerMetrics } from '../src/gateway/balancer/metrics.ts';
import { nextUnblock, pickReplica, type ReplicaLoad } from '../src/gateway/balancer/pick.ts';
import { gaveUp, placeCall, Refusal } from '../src/gateway/balancer/place.ts';
import { AppPool, type Lease, type PoolSettings } from '../src/gateway/balancer/pool.ts';
import { checkCortexBody, isPlainJsonObject, MAX_JSON_DEPTH } from '../src/gateway/body.ts';
import { CallContext } from '../src/gateway/call-context.ts';
import { DATAPLANE_MAX_FRAME_BYTES } from '../src/gateway/dataplane/protocol.ts';
import { createGateway } from '../src/gateway/gateway.ts';
import { SMALL_RESPONSE_BYTES } from '../src/gateway/handlers/run-sync.ts';
import { createGatewayMetrics } from '../src/gateway/metrics.ts';
import { authorize } from '../src/gateway/middleware/auth.ts';
import { customDomain } from '../src/gateway/middleware/custom-domain.ts';
import { route } from '../src/gateway/middleware/route.ts';
import { gatewayUnavailable, HandoffFailure, shuttingDown } from '../src/gateway/refusals.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../src/gateway/settings.ts';
import {
  BODIES_PASSED_ON_BYTES,
  mutatedBodies,
  NEAR_MISS_BODIES,
  seededRandom,
} from '../src/gateway/testing/body-corpus.ts';
import { FRAME_CASES, readCase } from '../src/gateway/testing/frame-cases.ts';
import { cachedRunTokenVerifier, type RememberedToken } from '../src/gateway/token-cache.ts';
import { normalizeHost } from '../src/local/resolver.ts';
import { createSyncCallLimiter } from '../src/runs/sync-calls.ts';
import type { AppResponse } from '../src/shared/contracts/seams.ts';
import { ApiError } from '../src/shared/errors.ts';
import { type AccessLogContext, logAccess } from '../src/shared/http/access-log.ts';
import {
  forwardQuery,
  forwardRequestHeaders,
  forwardResponseHeaders,
  upstreamError,
} from '../src/shared/http/upstream.ts';
import { readsWhole } from '../src/shared/http/upstream-dispatch.ts';
import { createLogger } from '../src/shared/log.ts';
import type { RunTokenClaims } from '../src/shared/run-tokens.ts';

/** undici's own parse of an answer's head (latin1 values, a repeated name an array), as the gateway gets it. */
const { parseHeaders } = createRequire(import.meta.url)('undici/lib/core/util.js') as {
  parseHeaders(raw: Buffer[]): IncomingHttpHeaders;
};

const DIR = join(import.meta.dirname, '..', 'native', 'dataplane', 'tests', 'vectors');

/** An ApiError as the data plane must answer it: status and the JSON body's fields, plus Allow when set. */
function errorOf(err: unknown): { status: number; body: Record<string, unknown> } {
  if (!(err instanceof ApiError)) throw err;
  return { status: err.status, body: err.toBody() };
}

/** The same seeded generator as body.test.ts's mutated corpus. */
// --- body: isPlainJsonObject (the byte scan) and checkCortexBody (the full check) -------------------

const nested = (levels: number) => `{"a":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;

const BODY_CASES: Array<string | Buffer> = [
  // empty and blank: no arguments, accepted by the full check only
  '',
  '  ',
  '\n\t ',
  '\r\n',
  // blank to Node's trim() only (handed off by the data plane)
  '\u000b',
  '\u00a0',
  '\ufeff',
  ' \u2028 ',
  // body.test.ts's near misses: refused by both
  ...NEAR_MISS_BODIES,
  // not an object
  '{',
  '[1]',
  '"s"',
  '3',
  'null',
  'true',
  'NaN',
  // body.test.ts's bodies passed on their bytes alone (the last: 308 digits; 309+ go to the full check,
  // which takes 309 nines and refuses 400 digits)
  ...BODIES_PASSED_ON_BYTES,
  `{"n":${'9'.repeat(309)}}`,
  `{"n":-${'9'.repeat(309)}}`,
  `{"name":1${'0'.repeat(400)}}`,
  // exponents: always the full check's
  '{"a":1e5}',
  '{"a":1.7976931348623157e308}',
  '{"name":1e999999}',
  '{"x":1,"name":{"deep":[1,-1e400]}}',
  '{"a":1E-400}',
  // depth: exactly the bound passes on the bytes, one more goes to the full check, which refuses it
  nested(MAX_JSON_DEPTH),
  nested(MAX_JSON_DEPTH + 1),
  nested(1000),
  `{${'"a":{'.repeat(MAX_JSON_DEPTH - 1)}${'}'.repeat(MAX_JSON_DEPTH - 1)}}`,
  `{${'"a":{'.repeat(MAX_JSON_DEPTH)}${'}'.repeat(MAX_JSON_DEPTH)}}`,
  // brackets and exponents inside strings
  `{"s":"${'['.repeat(600)} 1e999999"}`,
  // invalid UTF-8 (the full check's first refusal), and UTF-8 outside strings
  Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]),
  Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc3, 0x22, 0x7d]),
  Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d]),
  '{"é":1}',
  '{"a":é}',
];

function bodyCorpus(): Array<string | Buffer> {
  // body.test.ts's mutated corpus, drawn in the same order (fewer bodies: the file stays small).
  const bodies = mutatedBodies();
  const out: string[] = [];
  const seen = new Set<string>();
  while (out.length < 1500) {
    const text = bodies.next().value as string;
    if (!seen.has(text)) {
      seen.add(text);
      out.push(text);
    }
  }
  return out;
}

function bodyVector(body: string | Buffer) {
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  let check: unknown = 'ok';
  try {
    checkCortexBody(b);
  } catch (err) {
    // The data plane hands every refused body to Node, whose message (V8's JSON.parse) it does not repeat.
    if (!(err instanceof ApiError)) throw err;
    check = { status: err.status, code: err.code };
  }
  // Bodies that are not UTF-8 go as hex; every other as its text.
  const input = typeof body === 'string' ? { text: body } : { hex: b.toString('hex') };
  return { ...input, plain: isPlainJsonObject(b), check };
}

// --- route: /v4/<project>/<app>/<function> and the forwarded path's check --------------------------

const ROUTE_CASES: Array<[string, string]> = [
  ['POST', '/v4/acme/hello/greet'],
  ['POST', '/v4/acme/hello'],
  ['POST', '/v4/acme/hello/'],
  ['POST', '/v4/acme/hello/a/b/c'],
  ['POST', '/v4/acme/hello/a//b'],
  ['POST', '/v4/p-1/app-2/fn'],
  ['GET', '/v4/acme/hello/greet'],
  ['PUT', '/v4/acme/hello'],
  ['GET', '/v4/Acme/hello'],
  ['POST', '/v4/acme'],
  ['POST', '/v4/acme/'],
  ['POST', '/v4//hello/x'],
  ['POST', '/v4/'],
  ['POST', '/v3/acme/hello/x'],
  ['POST', '/'],
  ['POST', '/v4/Acme/hello/x'],
  ['POST', '/v4/acme/hello_world/x'],
  ['POST', '/v4/-acme/hello/x'],
  ['POST', '/v4/acme-/hello/x'],
  ['POST', `/v4/${'a'.repeat(63)}/hello/x`],
  ['POST', `/v4/${'a'.repeat(64)}/hello/x`],
  ['POST', '/v4/acme/hello.world/x'],
  ['POST', '/v4/ac%6De/hello/x'],
  ['POST', '/v4/acme/%68ello/x'],
  ['POST', '/v4/ac%2Fme/hello/x'],
  ['POST', '/v4/acme/hel%zzlo/x'],
  ['POST', '/v4/acme/hello%/x'],
  ['POST', '/v4/acme/hello/%E2%82%AC'],
  ['POST', '/v4/acme/hello/%E2%82'],
  ['POST', '/v4/acme/hello/..'],
  ['POST', '/v4/acme/hello/a/../b'],
  ['POST', '/v4/acme/hello/./a'],
  ['POST', '/v4/acme/hello/%2e%2e/x'],
  ['POST', '/v4/acme/hello/%2E/x'],
  ['POST', '/v4/acme/hello/a%2Fb'],
  ['POST', '/v4/acme/hello/a%5cb'],
  ['POST', '/v4/acme/hello/a\\b'],
  ['POST', '/v4/acme/hello/a.b/c.d'],
  ['POST', '/v4/acme/hello/...'],
  ['POST', '/v4/acme/hello/a%zz'],
  ['POST', '/v4/acme/hello/%'],
  ['POST', '/v4/acme/hello/a%20b'],
  // the route's `.` matches no line terminator (none reaches it from node:http; the rule is kept the same)
  ['POST', '/v4/acme/hello/a\nb'],
  ['POST', '/v4/acme/hello/a\u2028b'],
  ['POST', '/v4/ac\nme/hello/x'],
];

function routeVector([method, path]: [string, string]) {
  const headers: Record<string, string> = {};
  const ctx = {
    method,
    path,
    state: {} as Parameters<typeof route>[0]['state'],
    set(name: string, value: string) {
      headers[name.toLowerCase()] = value;
    },
  };
  try {
    route(ctx as unknown as Parameters<typeof route>[0]);
    return { method, path, target: ctx.state.target };
  } catch (err) {
    // The target is set before the 404 for a name that cannot exist, and before 405/400.
    return { method, path, target: ctx.state.target ?? null, error: { ...errorOf(err), headers } };
  }
}

// --- headers and query ---------------------------------------------------------------------------

/**
 * Node's header map from a head's lines, as node:http builds `req.headers` and `res.headers`: names
 * lower-cased, a repeated set-cookie an array, cookie joined with '; ', the fields node keeps once
 * (content-type, host, authorization, …) their first value, every other joined with ', '. It is the
 * IncomingMessage method node itself calls for every parsed head (internal: the generator stops if it goes).
 */
function nodeHeaders(raw: Array<[string, string]>): IncomingHttpHeaders {
  const msg = new IncomingMessage(null as unknown as Socket) as IncomingMessage & {
    _addHeaderLines?: (lines: string[], n: number) => void;
  };
  if (typeof msg._addHeaderLines !== 'function')
    throw new Error("node's IncomingMessage._addHeaderLines is gone");
  const lines = raw.flat();
  msg._addHeaderLines(lines, lines.length);
  return msg.headers;
}

/** Heads as the caller (request) or the app (response) sends them: name and value, in order. */
const REQUEST_HEADER_CASES: Array<Array<[string, string]>> = [
  [],
  [
    ['Content-Type', 'application/json'],
    ['Accept', '*/*'],
    ['User-Agent', 'curl/8'],
  ],
  [
    ['Host', 'gw'],
    ['Connection', 'keep-alive'],
    ['Keep-Alive', 'timeout=5'],
    ['Proxy-Connection', 'x'],
    ['Proxy-Authorization', 'p'],
    ['Transfer-Encoding', 'chunked'],
    ['TE', 'trailers'],
    ['Trailer', 'x-t'],
    ['Upgrade', 'h2c'],
    ['HTTP2-Settings', 's'],
    ['Content-Length', '10'],
    ['Expect', '100-continue'],
    ['Authorization', 'Bearer t'],
    ['X-Webhook-Secret', 's'],
    ['X-Request-Id', 'caller-chosen'],
    ['X-Apphost-Handoff', 'v=1; id=forged; start=1; reason=async'],
    ['X-Kept', 'yes'],
  ],
  [
    ['Connection', 'close, X-Drop-Me ,x-also'],
    ['X-Drop-Me', '1'],
    ['x-also', '2'],
    ['X-Stay', '3'],
  ],
  [
    ['Connection', 'x-a'],
    ['connection', 'X-B'],
    ['X-A', '1'],
    ['X-B', '2'],
    ['X-C', '3'],
  ],
  [
    ['Connection', ',, ,'],
    ['X-A', '1'],
  ],
  [
    ['X-Multi', 'a'],
    ['x-multi', 'b'],
    ['Set-Cookie', 'c=1'],
    ['set-cookie', 'd=2'],
  ],
  [
    ['Cookie', 'a=1'],
    ['cookie', 'b=2'],
    ['Content-Type', 'text/plain'],
    ['content-type', 'text/html'],
  ],
  [
    ['User-Agent', 'one'],
    ['User-Agent', 'two'],
    ['Referer', 'r1'],
    ['Referer', 'r2'],
    ['From', 'f1'],
    ['From', 'f2'],
  ],
  [
    ['If-Modified-Since', 'a'],
    ['If-Modified-Since', 'b'],
    ['Max-Forwards', '1'],
    ['Max-Forwards', '2'],
  ],
  [
    ['X-Empty', ''],
    ['X-Space', '  v  '],
    ['X-Upper', 'VALUE'],
  ],
  [
    ['Authorization', 'Bearer a'],
    ['Authorization', 'Bearer b'],
    ['X-Request-Id', 'a'],
    ['X-Request-Id', 'b'],
  ],
];

/** The fields node keeps once (its first value), each sent twice. */
const KEPT_ONCE = [
  'age',
  'from',
  'etag',
  'host',
  'server',
  'referer',
  'expires',
  'location',
  'user-agent',
  'retry-after',
  'content-type',
  'authorization',
  'max-forwards',
  'last-modified',
  'content-length',
  'proxy-authorization',
  'if-modified-since',
  'if-unmodified-since',
];
REQUEST_HEADER_CASES.push(
  KEPT_ONCE.flatMap(
    (n): Array<[string, string]> => [
      [n, `${n}-1`],
      [n.toUpperCase(), `${n}-2`],
    ],
  ),
);

const RESPONSE_HEADER_CASES: Array<Array<[string, string]>> = [
  [],
  [
    ['Content-Type', 'application/json'],
    ['Content-Length', '2'],
    ['Date', 'Mon, 23 Nov 2026 21:00:00 GMT'],
  ],
  [
    ['Connection', 'keep-alive'],
    ['Keep-Alive', 'timeout=5'],
    ['Proxy-Connection', 'x'],
    ['Transfer-Encoding', 'chunked'],
    ['TE', 'x'],
    ['Trailer', 'x-t'],
    ['Upgrade', 'h2c'],
    ['HTTP2-Settings', 's'],
    ['X-Request-Id', 'app-chosen'],
    ['Content-Length', '5'],
    ['Proxy-Authenticate', 'kept'],
    ['Authorization', 'kept'],
    ['X-Kept', 'yes'],
  ],
  [
    ['Connection', 'x-hop'],
    ['X-Hop', '1'],
    ['X-End', '2'],
  ],
  [
    ['Set-Cookie', 'a=1'],
    ['Set-Cookie', 'b=2'],
    ['X-Multi', 'a'],
    ['X-Multi', 'b'],
  ],
  [
    ['Cache-Control', 'no-store'],
    ['ETag', '"1"'],
    ['ETag', '"2"'],
    ['Location', '/a'],
    ['Location', '/b'],
  ],
  [
    ['Server', 's1'],
    ['Server', 's2'],
    ['Age', '1'],
    ['Expires', 'e'],
    ['Last-Modified', 'l'],
    ['Retry-After', '1'],
  ],
  [
    ['Content-Type', 'text/event-stream'],
    ['Content-Type', 'text/plain'],
    ['Vary', 'a'],
    ['Vary', 'b'],
  ],
];

const QUERY_CASES = [
  '',
  '?',
  '?a=1',
  'a=1',
  '?a=1&b=2',
  '?async=true',
  '?async=false&x=1',
  '?x=1&webhookEndpoint=http%3A%2F%2Fh&y=2',
  '?async=1&async=2',
  '?ASYNC=true',
  '?a=%20&b&c=ä',
  '?a+b=c+d',
  '?a=%zz',
  '?=x',
  '?a&&b',
  '?a=1;b=2',
  "?e=%E2%82%AC&s=~*!()'",
  '?k=v#frag',
  '?a=b=c',
  '?%61sync=true',
  // percent-decoding that is not UTF-8 (U+FFFD), a bare or short %, encoded separators
  '?a=%FF',
  '?a=%C3',
  '?a=%E2%82x',
  '?%=1',
  '?a=%2',
  '?b=%2B+%26&c=%3D',
  '?webhookEndpoint&async',
  '?&&',
];

// --- auth: the bearer token of the Authorization header ----------------------------------------------

/** Authorization values as node hands them over (latin1: one char a byte); null when there is none. */
const AUTH_CASES: Array<string | null> = [
  null,
  '',
  'Bearer abc.def-ghi_jkl',
  'bearer abc',
  'BEARER abc',
  'BeArEr abc',
  'Bearer',
  'Bearer ',
  'Bearer  ',
  'Bearer  abc  ',
  'Bearer\tabc',
  'Bearer\tabc\t',
  'Bearerabc',
  'Bearer abc def',
  'Basic dXNlcjpwdw==',
  ' Bearer abc',
  'Bearer abc\u000b',
  'Bearer abc\u000c',
  'Bearer\u00a0abc',
  'Bearer abc\u00a0',
  'Bearer a\u00a0b',
  'Bearer \u0085abc',
  'Bearer abc\u0085',
  'Bearer a\u00ffb',
  'Bearer =',
  'Bearer "abc"',
  'Token abc',
  'Bearer\u000babc',
  'Bearer abc\r',
];

function authVector(header: string | null) {
  const headers: Record<string, string> = {};
  let token: string | null = null;
  const ctx = {
    state: { target: { projectId: 'p', appName: 'a', path: '' } },
    get: (name: string) => (name.toLowerCase() === 'authorization' ? (header ?? '') : ''),
    set(name: string, value: string) {
      headers[name.toLowerCase()] = value;
    },
  };
  try {
    authorize(ctx as unknown as Parameters<typeof authorize>[0], (t) => {
      token = t;
      return { projectId: 'p' } as ReturnType<Parameters<typeof authorize>[1]> & { projectId: string };
    });
    return { header, token };
  } catch (err) {
    return { header, token, error: { ...errorOf(err), headers } };
  }
}

// --- balancer: pickReplica, nextUnblock, poolSettingsFor ---------------------------------------------

function pickCases() {
  const rand = seededRandom(0x5eed1234);
  const out: Array<{ replicas: ReplicaLoad[]; capacity: number; now: number; start: number }> = [
    { replicas: [], capacity: 1, now: 0, start: 0 },
    { replicas: [{ inflight: 0, blockedUntil: 0 }], capacity: 1, now: 0, start: 0 },
    { replicas: [{ inflight: 1, blockedUntil: 0 }], capacity: 1, now: 0, start: 0 },
    { replicas: [{ inflight: 0, blockedUntil: 10 }], capacity: 1, now: 10, start: 0 },
    { replicas: [{ inflight: 0, blockedUntil: 11 }], capacity: 1, now: 10, start: 0 },
  ];
  for (let k = 0; k < 300; k++) {
    const n = 1 + rand(6);
    const capacity = 1 + rand(4);
    const now = 100 + rand(3);
    const replicas = Array.from({ length: n }, () => ({
      inflight: rand(capacity + 1),
      blockedUntil: rand(4) === 0 ? 99 + rand(5) : 0,
    }));
    out.push({ replicas, capacity, now, start: rand(2 * n) });
  }
  return out.map((c) => ({
    ...c,
    pick: pickReplica(c.replicas, c.capacity, c.now, c.start),
    nextUnblock: nextUnblock(c.replicas, c.capacity) ?? null,
  }));
}

function poolSettingsCases() {
  const out = [];
  for (const replicaConcurrency of [1, 2, 10, 100, 1000])
    for (const maxReplicas of [0, 1, 3, 10, 200])
      for (const [queueDepthFactor, maxQueuePerApp] of [
        [10, 1000],
        [0, 1000],
        [1, 5],
      ] as const) {
        const scaling = {
          minReplicas: 0,
          maxReplicas,
          replicaConcurrency,
          targetUtilization: 70,
          scalingBuffer: 0,
          cooldownSeconds: 300,
        };
        const settings = { ...DEFAULT_BALANCER_SETTINGS, queueDepthFactor, maxQueuePerApp };
        out.push({ scaling, settings, pool: poolSettingsFor(scaling, settings) });
      }
  return out;
}

// --- errors after dispatch: the bytes the data plane writes itself -----------------------------------

/** An error as written (writeError): status, Retry-After, and the body's exact bytes. */
function wire(err: unknown) {
  if (!(err instanceof ApiError)) throw err;
  return { status: err.status, retryAfter: err.retryAfter ?? null, body: JSON.stringify(err.toBody()) };
}

function errorCases() {
  const apps = ['hello', 'acme/hello', 'q"u\\o\u2028t\u0001é😀'];
  const gaveUpCases = [];
  for (const app of apps)
    for (const refused of Object.values(Refusal))
      for (const detail of [undefined, 'ECONNREFUSED', 'x"y'])
        for (const tries of [1, 4]) {
          const last = detail === undefined ? { refused } : { refused, detail };
          gaveUpCases.push({
            app,
            refused,
            detail: detail ?? null,
            tries,
            retryAfterSeconds: 5,
            ...wire(gaveUp(app, last, tries, 5)),
          });
        }
  const upstream = [
    'UND_ERR_HEADERS_TIMEOUT',
    'UND_ERR_BODY_TIMEOUT',
    'ECONNREFUSED',
    'ECONNRESET',
    'UND_ERR_SOCKET',
    '',
  ].map((code) => ({ code, ...wire(upstreamError(Object.assign(new Error('x'), code ? { code } : {}))) }));
  // The gateway's answers that are not a call's step: the drain's 503 (gateway.ts) and the hand-off's
  // 503 gateway_unavailable (native mode only), as refusals.ts defines them.
  const shuttingDownCase = { retryAfterSeconds: 7, ...wire(shuttingDown(7)) };
  const unavailable = Object.values(HandoffFailure).map((reason) => ({
    reason,
    retryAfterSeconds: 5,
    ...wire(gatewayUnavailable(reason, 5)),
  }));
  return { gaveUp: gaveUpCases, upstream, shuttingDown: shuttingDownCase, gatewayUnavailable: unavailable };
}

// --- meter and sync-call record admission ------------------------------------------------------------

/** ConcurrencyMeter runs: each a start time and steps (set a level, or take the average). */
function meterCases() {
  const rand = seededRandom(0x3e7e2);
  const runs = [];
  for (let k = 0; k < 40; k++) {
    const start = 1_000 + rand(1000);
    const meter = new ConcurrencyMeter(start);
    let now = start;
    const steps = [];
    for (let m = 0; m < 30; m++) {
      // Time mostly moves on, sometimes stands still, now and then steps back (a clock is not monotonic).
      const move = rand(10);
      now += move === 0 ? 0 : move === 1 ? -rand(50) : rand(300);
      if (rand(3) === 0) steps.push({ take: now, avg: meter.take(now) });
      else {
        const level = rand(12);
        meter.set(now, level);
        steps.push({ set: now, level });
      }
    }
    runs.push({ start, steps, level: meter.level });
  }
  return runs;
}

/** createSyncCallLimiter runs: settings and calls (project, app, finished at) with the answer for each. */
function recordCases() {
  const rand = seededRandom(0x5c0de);
  const runs = [];
  for (const [perAppPerSecond, perSecond] of [
    [10, 200],
    [2, 5],
    [0, 200],
    [3, 3],
    [1, 1000],
  ] as const) {
    const admit = createSyncCallLimiter({ perAppPerSecond, perSecond });
    let now = 1_700_000_000_000;
    const calls = [];
    for (let k = 0; k < 400; k++) {
      now += rand(5) === 0 ? 1000 - rand(2000) : rand(40);
      const projectId = `p${rand(3)}`;
      const appName = `a${rand(4)}`;
      calls.push([projectId, appName, now, admit(projectId, appName, now)]);
    }
    runs.push({ perAppPerSecond, perSecond, calls });
  }
  return runs;
}

// --- place: retries, block periods and the queue bound after a replica's refusal ---------------------

type PlaceStep = { at: number; result: 'ok' | Refusal; detail?: string };

/** placeCall on a scripted pool: what it asks the pool (acquire with a requeue deadline, refuse with a block). */
async function placeRun(script: PlaceStep[], settings: typeof DEFAULT_BALANCER_SETTINGS) {
  let next = 0;
  let clock = script[0]?.at ?? 0;
  const log: unknown[] = [];
  const lease = {
    refuse: (ms: number, refused: Refusal) => log.push({ refuse: ms, refused }),
    release: () => log.push({ release: true }),
  };
  const pool = {
    app: 'acme/hello',
    acquire: async (o: { requeue?: { deadline: number } }) => {
      log.push({ acquire: o.requeue?.deadline ?? null });
      return lease;
    },
  };
  const attempt = async () => {
    const step = script[next++] as PlaceStep;
    clock = step.at;
    return step.result === 'ok'
      ? { value: 'ok' }
      : { refused: step.result, ...(step.detail ? { detail: step.detail } : {}) };
  };
  let outcome: unknown = 'ok';
  try {
    await placeCall(pool as unknown as AppPool, settings, attempt, { now: () => clock });
  } catch (err) {
    outcome = wire(err);
  }
  return { settings, script: script.slice(0, next), log, outcome };
}

async function placeCases() {
  const rand = seededRandom(0x91ace);
  const refusals = Object.values(Refusal);
  const runs = [];
  for (const [maxRetries, queueTimeoutMs] of [
    [3, 30_000],
    [0, 1_000],
    [1, 100],
  ] as const) {
    const settings = { ...DEFAULT_BALANCER_SETTINGS, maxRetries, queueTimeoutMs };
    // The queue bound to the millisecond: a refusal one before the deadline is retried, one at it is not.
    for (const late of [queueTimeoutMs - 1, queueTimeoutMs])
      runs.push(
        await placeRun(
          [
            { at: 5_000, result: 'at_capacity' },
            { at: 5_000 + late, result: 'at_capacity' },
            { at: 5_000 + late, result: 'ok' },
          ],
          settings,
        ),
      );
    for (let k = 0; k < 40; k++) {
      let at = 1_000_000 + rand(1000);
      const script: PlaceStep[] = [];
      for (let m = 0; m < 12; m++) {
        at += rand(3) === 0 ? 0 : rand(queueTimeoutMs / 2);
        const refused = refusals[rand(refusals.length)] as Refusal;
        script.push(
          rand(8) === 0
            ? { at, result: 'ok' }
            : { at, result: refused, ...(rand(2) ? { detail: 'ECONNREFUSED' } : {}) },
        );
      }
      script.push({ at, result: 'ok' });
      runs.push(await placeRun(script, settings));
    }
  }
  return runs;
}

// --- pool: AppPool as a trace of events on a fake clock ----------------------------------------------

/**
 * A fake clock with its own timers, for AppPool's deadlines and unblock timer: `advance(to)` fires every
 * timer due by `to` in order of (due time, creation), the clock set to each one's time. Installed over
 * the global setTimeout/clearTimeout only while a run is driven.
 */
class FakeClock {
  now = 0;
  #seq = 0;
  #timers = new Map<number, { due: number; seq: number; fn: () => void }>();
  setTimeout = (fn: () => void, ms = 0) => {
    const id = ++this.#seq;
    this.#timers.set(id, { due: this.now + Math.max(0, ms), seq: id, fn });
    return { id, unref() {}, ref() {}, [Symbol.toPrimitive]: () => id } as unknown as NodeJS.Timeout;
  };
  clearTimeout = (t: unknown) => {
    if (t && typeof t === 'object' && 'id' in t) this.#timers.delete((t as { id: number }).id);
  };
  /** The next timer due by `to`, taken off the list (the clock moved to it). */
  take(to: number): (() => void) | undefined {
    let next: { due: number; seq: number; fn: () => void } | undefined;
    let key = 0;
    for (const [k, t] of this.#timers)
      if (t.due <= to && (!next || t.due < next.due || (t.due === next.due && t.seq < next.seq))) {
        next = t;
        key = k;
      }
    if (!next) return undefined;
    this.#timers.delete(key);
    this.now = Math.max(this.now, next.due);
    return next.fn;
  }
}

/** Lets promise callbacks run (grants and refusals settle on microtasks). */
const settle = () => new Promise<void>((r) => setImmediate(r));

type PoolEvent =
  | { at: number; op: 'acquire'; call: number; requeue?: number }
  | { at: number; op: 'release' | 'cancel'; call: number }
  | { at: number; op: 'refuse'; call: number; blockMs: number }
  | { at: number; op: 'replicas'; ids: string[] }
  | { at: number; op: 'failure'; failed: boolean }
  | { at: number; op: 'configure'; settings: PoolSettings }
  | { at: number; op: 'snapshot'; concurrency?: number };

/** The data plane's hand-off of a held call (not a pool outcome: the generator's abort reason). */
class HandedOff {
  readonly deadline: number | null;
  constructor(deadline: number | null) {
    this.deadline = deadline;
  }
}

/**
 * One run: random events on a real AppPool with a fake clock, and what became of every call, with its
 * time. Where AppPool would hold a call for an app with no ready replica (cold start, a start failure,
 * replicas dropping to zero under waiting calls), the data plane hands the call to Node (with the
 * deadline it had, if any); the run records what AppPool did and then takes the call out of the pool
 * (its abort), as the hand-off takes it out of the data plane's, so both go on from the same state.
 */
async function poolRun(seed: number) {
  const rand = seededRandom(seed);
  const clock = new FakeClock();
  const realSet = globalThis.setTimeout;
  const realClear = globalThis.clearTimeout;
  const pick = <T>(xs: readonly T[]) => xs[rand(xs.length)] as T;
  const randomSettings = (): PoolSettings => ({
    capacity: 1 + rand(3),
    maxQueue: 1 + rand(4),
    queueTimeoutMs: 20 + rand(200),
    coldStartTimeoutMs: 5_000,
    retryAfterSeconds: 1 + rand(5),
  });
  let settings = randomSettings();
  const initial = settings;
  clock.now = 1_000_000 + rand(1000);
  const start = clock.now;
  Object.assign(globalThis, { setTimeout: clock.setTimeout, clearTimeout: clock.clearTimeout });
  const events: PoolEvent[] = [];
  const outcomes: unknown[] = [];
  let end: unknown = null;
  try {
    let wakes = 0;
    const pool = new AppPool('acme/hello', settings, { now: () => clock.now, onWake: () => wakes++ });
    const held = new Map<number, Lease>();
    const released: number[] = [];
    const waiting = new Map<number, { ac: AbortController; deadline: number | null }>();
    let calls = 0;
    let replicaIds: string[] = [];
    const handOffWaiters = () => {
      if (pool.readyReplicas > 0) return;
      for (const [, w] of waiting) w.ac.abort(new HandedOff(w.deadline));
    };
    const acquire = (call: number, requeue?: number) => {
      const ac = new AbortController();
      const cold = pool.readyReplicas === 0;
      const queued = pool.queued;
      const deadline = requeue ?? clock.now + settings.queueTimeoutMs;
      const p = pool.acquire({
        signal: ac.signal,
        ...(requeue !== undefined ? { requeue: { deadline } } : {}),
      });
      // Queued (not placed, not refused at once) when the queue grew.
      if (pool.queued > queued) waiting.set(call, { ac, deadline: cold ? (requeue ?? null) : deadline });
      p.then(
        (lease) => {
          waiting.delete(call);
          held.set(call, lease);
          outcomes.push({ call, at: clock.now, granted: lease.replica.id });
        },
        (err: unknown) => {
          waiting.delete(call);
          if (err instanceof HandedOff)
            outcomes.push({ call, at: clock.now, handoff: err.deadline, held: true });
          else if (err instanceof ApiError) {
            const out = { call, at: clock.now, ...wire(err) };
            // A refusal of a call for an app with no ready replica is Node's to answer: handed off too.
            outcomes.push(cold ? { ...out, handoff: requeue ?? null } : out);
          } else outcomes.push({ call, at: clock.now, cancelled: true });
        },
      );
      // AppPool holds a call at zero replicas (and asks for one): the data plane hands it off instead.
      if (cold) handOffWaiters();
    };
    for (let k = 0; k < 60; k++) {
      const at = clock.now + (rand(4) === 0 ? 0 : rand(80));
      // Timers due by then first, each at its own time.
      for (let fn = clock.take(at); fn; fn = clock.take(at)) {
        fn();
        await settle();
      }
      clock.now = at;
      const r = rand(100);
      let ev: PoolEvent;
      if (replicaIds.length === 0 && k === 0) {
        replicaIds = ['r1', 'r2'].slice(0, 1 + rand(2));
        ev = { at, op: 'replicas', ids: replicaIds };
      } else if (r < 40) ev = { at, op: 'acquire', call: ++calls };
      else if (r < 62 && held.size > 0) ev = { at, op: 'release', call: pick([...held.keys()]) };
      else if (r < 65 && released.length > 0) ev = { at, op: 'release', call: pick(released) };
      else if (r < 74 && held.size > 0)
        ev = { at, op: 'refuse', call: pick([...held.keys()]), blockMs: 1 + rand(120) };
      else if (r < 81 && waiting.size > 0) ev = { at, op: 'cancel', call: pick([...waiting.keys()]) };
      else if (r < 89) {
        replicaIds = ['r1', 'r2', 'r3', 'r4'].filter(() => rand(3) !== 0);
        if (rand(6) === 0) replicaIds = [];
        ev = { at, op: 'replicas', ids: replicaIds };
      } else if (r < 90) ev = { at, op: 'failure', failed: rand(2) === 0 };
      else if (r < 93) ev = { at, op: 'snapshot' };
      else if (r < 95) {
        settings = randomSettings();
        ev = { at, op: 'configure', settings };
      } else ev = { at, op: 'acquire', call: ++calls };
      events.push(ev);
      switch (ev.op) {
        case 'acquire':
          acquire(ev.call);
          break;
        case 'release':
          held.get(ev.call)?.release();
          if (held.delete(ev.call)) released.push(ev.call);
          break;
        case 'refuse': {
          // As placeCall: the slot given back with a block, the call back at the head of the queue with
          // the deadline of its first refusal (queueTimeoutMs after it), unless that has passed.
          held.get(ev.call)?.refuse(ev.blockMs, 'at_capacity');
          held.delete(ev.call);
          if (rand(4) !== 0) {
            const again = {
              at,
              op: 'acquire' as const,
              call: ++calls,
              requeue: at + rand(settings.queueTimeoutMs),
            };
            events.push(again);
            await settle();
            acquire(again.call, again.requeue);
          }
          break;
        }
        case 'cancel':
          waiting.get(ev.call)?.ac.abort(new Error('client went away'));
          break;
        case 'replicas':
          pool.setReplicas(ev.ids.map((id) => ({ id, url: `http://${id}` })));
          handOffWaiters();
          break;
        case 'failure':
          pool.setStartFailure(ev.failed ? { reason: 'ImportError', message: 'no numpy' } : undefined);
          break;
        case 'configure':
          pool.configure(ev.settings);
          break;
        case 'snapshot':
          // The load report's read: calls in flight plus waiting, averaged over time since the last.
          ev.concurrency = pool.snapshot().concurrency;
          break;
      }
      await settle();
      // What the pool holds after it: calls in flight, waiting, and in flight per ready replica.
      const s = pool.stats();
      Object.assign(events[events.length - 1] as PoolEvent, {
        after: [s.inflight, s.queued, pool.replicaLoad()],
      });
    }
    // The calls still waiting: their deadlines, and any unblock, run out.
    for (let fn = clock.take(Number.MAX_SAFE_INTEGER); fn; fn = clock.take(Number.MAX_SAFE_INTEGER)) {
      fn();
      await settle();
    }
    const s = pool.stats();
    end = [s.inflight, s.queued, pool.replicaLoad()];
    void wakes;
  } finally {
    Object.assign(globalThis, { setTimeout: realSet, clearTimeout: realClear });
  }
  return { seed, start, settings: initial, events, outcomes, end };
}

async function poolCases() {
  const runs = [];
  for (let k = 0; k < 60; k++) runs.push(await poolRun(0x9001 + k));
  return runs;
}

// --- tokens: which calls the verified-token cache serves, and what it remembers ----------------------

/**
 * cachedRunTokenVerifier over a seeded run of calls (header bytes as node reads them, latin1; the
 * project of the call's path; the clock): whether the cache served the call (a hit) and the token it
 * remembered after a miss (onRemember, the data plane's `token` frame). Clocks land on entries' `until`
 * and one before it, and some tokens expire before the cache's TTL.
 */
async function tokenCases() {
  const rand = seededRandom(0x70c4e);
  const start = 1_700_000_000_000;
  const runs = [];
  for (const [maxEntries, ttlMs] of [
    [3, 60_000],
    [1, 1_000],
    [8, 5_000],
  ] as const) {
    // Header bytes: ASCII tokens, one differing in its last byte, a long one, and non-ASCII ones
    // (verified here, as a fake key set would: the data plane must still hand them off).
    const pool = [
      'eyJhbGciOiJFZERTQSJ9.a.sig0',
      'eyJhbGciOiJFZERTQSJ9.a.sig1',
      'eyJhbGciOiJFZERTQSJ9.b.sig0',
      'tok-c',
      'tok-d',
      'x'.repeat(300),
      't\u00f6k-latin1',
      'tok-\u00e9\u00ff',
    ];
    const projects = ['acme', 'other', 'zed'];
    const claimsOf = new Map(
      pool.map((t, k) => [
        t,
        {
          projectId: projects[k % projects.length] as string,
          // Some expire before the TTL, one never (an invalid date: the TTL alone).
          expiresAt:
            k === 3 ? new Date(Number.NaN) : new Date(start + (k % 2 === 0 ? 2 * ttlMs : ttlMs / 3) + k),
          tokenId: `id-${k}`,
        },
      ]),
    );
    let now = start;
    let remembered: RememberedToken | undefined;
    const untils: number[] = [];
    const cached = cachedRunTokenVerifier(async (t) => claimsOf.get(t) as RunTokenClaims, {
      ttlMs,
      maxEntries,
      now: () => now,
      onRemember: (t) => {
        remembered = t;
      },
    });
    const calls = [];
    for (let k = 0; k < 300; k++) {
      const r = rand(10);
      if (r === 0 && untils.length > 0) now = untils[rand(untils.length)] as number;
      else if (r === 1 && untils.length > 0) now = (untils[rand(untils.length)] as number) - 1;
      else now += rand(3) === 0 ? 0 : rand(ttlMs / 4);
      const token = pool[rand(pool.length)] as string;
      const project =
        rand(6) === 0 ? (projects[rand(projects.length)] as string) : claimsOf.get(token)?.projectId;
      remembered = undefined;
      const answer = cached(token);
      const hit = !(answer instanceof Promise);
      if (!hit) await answer;
      // Set by onRemember during the call (TS cannot see the closure's assignment).
      const pushed = remembered as RememberedToken | undefined;
      if (pushed) untils.push(pushed.until);
      // ASCII tokens as their text, others as the header's bytes.
      // biome-ignore lint/suspicious/noControlCharactersInRegex: the ASCII range
      const bytes = /^[\x00-\x7f]*$/.test(token)
        ? { text: token }
        : { hex: Buffer.from(token, 'latin1').toString('hex') };
      calls.push({ ...bytes, project, now, hit, remembered: pushed ?? null });
    }
    runs.push({ maxEntries, ttlMs, calls });
  }
  return runs;
}

// --- access log: logAccess through the gateway's pino logger, byte for byte -----------------------------

type AccessIn = {
  timeMs: number;
  startedAt: number;
  now: number;
  requestId: string;
  method: string;
  status: number;
  code?: string;
  aborted: boolean;
  mode: 'sync' | 'stream';
  project?: string;
  app?: string;
};

/** The lines logAccess writes through createLogger(...).child({ component: 'gateway' }) at `level`. */
function accessLines(level: string, inputs: AccessIn[]): Array<string | null> {
  let out: string[] = [];
  const destination = { write: (s: string) => out.push(s) } as unknown as NodeJS.WritableStream;
  const log = createLogger({ name: 'apphost-gateway', level, destination }).child({ component: 'gateway' });
  const realNow = Date.now;
  return inputs.map((i) => {
    out = [];
    const ctx: AccessLogContext<never> & { state: Record<string, unknown> } = {
      state: { startedAt: i.startedAt, requestId: i.requestId, errorCode: i.code, log },
      status: i.status,
      method: i.method,
      res: { writableFinished: !i.aborted } as never,
    } as never;
    // pino's isoTime reads Date.now(): the line's time, fixed.
    Date.now = () => i.timeMs;
    try {
      logAccess(
        { log, now: () => i.now, done: () => ({ mode: i.mode, project: i.project, app: i.app }) },
        ctx as never,
      );
    } finally {
      Date.now = realNow;
    }
    if (out.length > 1) throw new Error('logAccess wrote more than one line');
    return out[0] ?? null;
  });
}

function accessCases(): AccessIn[] {
  const rand = seededRandom(0xacce55);
  const pick = <T>(xs: readonly T[]) => xs[rand(xs.length)] as T;
  const names = [
    'acme',
    'hello-world',
    'p"q',
    'a\\b',
    'caf\u00e9',
    '\u65e5\u672c',
    '\u{1f600}',
    'line\u2028sep\u2029',
    'tab\there',
    'nl\nand\rcr',
    'nul\u0000',
    '\u0001\u0008\u000b\u000c\u001f',
    'del\u007f',
    '</script>',
    '',
    'x'.repeat(100),
    `${'"'.repeat(101)}`,
    `${'q'.repeat(120)}"\\`,
    `${'c'.repeat(99)}\u0002`,
    `${'\u00e9'.repeat(60)}\n`,
  ];
  const statuses = [200, 201, 204, 299, 302, 399, 400, 401, 404, 413, 429, 499, 500, 502, 503, 504, 599];
  const codes = [undefined, '', 'upstream_unreachable', 'queue_timeout', 'upstream_timeout', 'q"uote'];
  const times = [
    -62_135_596_800_000, -62_198_755_200_000, -59_011_459_200_001, -30_610_224_000_001, 0, -1, 1,
    1_700_000_000_123, 951_782_400_000, 253_402_300_799_999, 253_402_300_800_000, -62_167_219_200_001,
    4_102_444_800_000,
  ];
  const durations = [0, 1, 2, 499, 500, 999, 1000, 1001, 123_456, 86_400_000, -1, -5];
  const out: AccessIn[] = [];
  // Every name and status once in a plain line, every time once, then a seeded mix.
  for (const n of names)
    out.push({
      timeMs: 1_700_000_000_123,
      startedAt: 1_700_000_000_120,
      now: 1_700_000_000_123,
      requestId: n,
      method: 'POST',
      status: 200,
      aborted: false,
      mode: 'sync',
      project: n,
      app: n,
    });
  for (const status of statuses)
    out.push({
      timeMs: 1_700_000_000_000,
      startedAt: 1_700_000_000_000,
      now: 1_700_000_000_007,
      requestId: '8e0a4a4e-5d43-4c7b-9d7e-3f1f7c1c2b1a',
      method: 'POST',
      status,
      aborted: false,
      mode: 'sync',
      project: 'acme',
      app: 'hello',
    });
  // Every time once (years before 1000, after 9999, before 0: toISOString's padding and sign).
  for (const timeMs of times)
    out.push({
      timeMs,
      startedAt: 0,
      now: 0,
      requestId: 'r',
      method: 'POST',
      status: 200,
      aborted: false,
      mode: 'sync',
    });
  for (let k = 0; k < 200; k++) {
    const now = 1_700_000_000_000 + rand(10_000_000);
    const optional = <T>(v: T) => (rand(8) === 0 ? undefined : v);
    out.push({
      timeMs: rand(3) === 0 ? pick(times) : now + rand(3),
      startedAt: now - pick(durations),
      now,
      requestId: rand(2) === 0 ? pick(names) : `${rand(1e9).toString(16)}-${k}`,
      method: pick(['POST', 'GET', 'post', 'M"X']),
      status: pick(statuses),
      code: pick(codes),
      aborted: rand(4) === 0,
      mode: pick(['sync', 'stream'] as const),
      project: optional(pick(names)),
      app: optional(pick(names)),
    });
  }
  return out;
}

/** Whether a line of each status is written at each of pino's levels. */
function accessLevels() {
  const statuses = [200, 399, 400, 499, 500, 599];
  const base = {
    timeMs: 0,
    startedAt: 0,
    now: 0,
    requestId: 'r',
    method: 'POST',
    aborted: false,
    mode: 'sync' as const,
  };
  return ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'].map((level) => ({
    level,
    written: accessLines(
      level,
      statuses.map((status) => ({ ...base, status })),
    ).map((l, k) => [statuses[k], l !== null]),
  }));
}

// --- the upstream hop's failures: undici's code → 502/504 and whether it is retried elsewhere ---------

/**
 * The codes undici gives for a failed call (its own UND_ERR_* and the socket's errno names), each as
 * `upstreamError` answers it and whether the balancer retries it on another replica (`notConnected`:
 * nothing reached the app). native/dataplane/src/upstream_failure.rs maps io and hyper errors to them.
 */
const UPSTREAM_CODES = [
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EADDRNOTAVAIL',
  'UND_ERR_SOCKET',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_HEADERS_OVERFLOW',
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'HPE_INVALID_CONSTANT',
  '',
];

function upstreamFailureCases() {
  return UPSTREAM_CODES.map((code) => {
    // '': a failure without a code or a name, which undici's fallback calls 'error'.
    const err = upstreamError(code ? Object.assign(new Error('x'), { code }) : {});
    return { code, ...wire(err), retried: notConnected(err) ?? null };
  });
}

// --- X-Apphost-Refused: the runtime's refusal, as the gateway reads it -------------------------------

/** Answers as undici parses them (parseHeaders: latin1 values, a repeated name an array), and refusalOf's answer. */
function refusedCases() {
  const heads: Array<[number, Array<[string, string]>]> = [];
  const values = [
    'at_capacity',
    'shutting_down',
    'AT_CAPACITY',
    'Shutting_Down',
    ' at_capacity ',
    '\tat_capacity\t',
    '\u00a0at_capacity',
    'at_capacity\u000b',
    'at_capacity\u000c',
    'at_capacity\u0085',
    'at_capacity,x',
    'at capacity',
    'at-capacity',
    'at_capacityy',
    '',
    'unreachable',
    'at_capac\u00cdty',
  ];
  for (const status of [429, 503, 200, 500])
    for (const v of values) heads.push([status, [['X-Apphost-Refused', v]]]);
  for (const status of [429, 503]) {
    heads.push([status, []]);
    heads.push([
      status,
      [
        ['x-apphost-refused', 'at_capacity'],
        ['X-Apphost-Refused', 'shutting_down'],
      ],
    ]);
    heads.push([
      status,
      [
        ['X-Apphost-Refused', 'shutting_down'],
        ['x-apphost-refused', 'at_capacity'],
      ],
    ]);
    heads.push([
      status,
      [
        ['X-Apphost-Refused', 'nope'],
        ['X-Apphost-Refused', 'at_capacity'],
      ],
    ]);
    heads.push([status, [['X-Apphost-Refused-By', 'at_capacity']]]);
  }
  return heads.map(([status, raw]) => {
    const headers = parseHeaders(
      raw.flatMap(([n, v]) => [Buffer.from(n, 'latin1'), Buffer.from(v, 'latin1')]),
    );
    return { status, in: raw, refused: refusalOf({ statusCode: status, headers }) ?? null };
  });
}

// --- custom domains: the Host header's name, as the gateway looks it up ------------------------------

const HOST_CASES: Array<string | null> = [
  null,
  '',
  'api.example.com',
  'API.Example.COM',
  'api.example.com:8080',
  'api.example.com:',
  'api.example.com.',
  'api.example.com.:443',
  'api.example.com..',
  ':80',
  'a:b:c',
  'localhost',
  '127.0.0.1',
  '127.0.0.1:3000',
  '[::1]',
  '[::1]:8080',
  '[2001:DB8::1]:443',
  '[::1',
  '[]',
  '[junk]',
  'host name',
  'a b:80',
  'bücher.example',
  'BÜCHER.example',
  'xn--bcher-kva.example',
  'under_score.example',
  'a..b',
  '.',
  '-a-.example',
  'a%41.example',
  'a/b',
  'a@b.example',
  'ex\u00e4mple.com:80',
];

function hostCases() {
  return HOST_CASES.map((host) => {
    const req = new IncomingMessage(null as unknown as Socket);
    if (host !== null) req.headers.host = host;
    const ctx = new CallContext(req, new ServerResponse(req), { requestId: 'r', now: 0, log: quietLog });
    let lookup: string | null = null;
    customDomain(ctx, {
      resolveHost: (h: string) => {
        lookup = h;
        return undefined;
      },
    } as unknown as Parameters<typeof customDomain>[1]);
    // The resolvers' table key: local mode's normalizeHost (the cluster's resolveHost lower-cases and
    // drops one trailing dot, the same for every host the data plane looks up itself).
    return { host, hostname: ctx.hostname, lookup, key: lookup === null ? null : normalizeHost(lookup) };
  });
}

// --- answers: what the gateway sends for an app's answer, and while it drains -------------------------

const quietLog = {
  child: () => quietLog,
  info() {},
  warn() {},
  error() {},
  debug() {},
  trace() {},
  fatal() {},
} as unknown as Parameters<typeof createGateway>[0]['log'];

/** The gateway's real handler with every I/O seam faked; `answer` is what the app answers. */
function vectorGateway(answer: { current?: AppResponse }) {
  const sub = { unsubscribe() {}, closed: new Promise(() => {}) };
  return createGateway({
    resolver: {
      resolve: (projectId: string, appName: string) => ({
        projectId,
        appName,
        runtime: 'custom',
        upstream: 'http://app',
        ready: true,
        gracePeriodSeconds: 30,
      }),
      resolveHost: () => undefined,
    } as unknown as Parameters<typeof createGateway>[0]['resolver'],
    verifyRunToken: (() => ({ projectId: 'acme' })) as unknown as Parameters<
      typeof createGateway
    >[0]['verifyRunToken'],
    nc: { info: {}, options: {}, subscribe: () => sub, isClosed: () => false } as unknown as Parameters<
      typeof createGateway
    >[0]['nc'],
    secretBox: {} as Parameters<typeof createGateway>[0]['secretBox'],
    log: quietLog,
    registry: new Registry(),
    settings: { ...DEFAULT_GATEWAY_SETTINGS, retryAfterSeconds: 7 },
    callApp: (async () => answer.current) as unknown as Parameters<typeof createGateway>[0]['callApp'],
  });
}

/** One call through the handler: the head node writes (status line and header lines) and the body. */
async function throughGateway(gateway: ReturnType<typeof createGateway>) {
  const req = new IncomingMessage(null as unknown as Socket);
  req.method = 'POST';
  req.url = '/v4/acme/hello/fn';
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req.headers = { authorization: 'Bearer t', 'content-length': '0' };
  req.push(null);
  const res = new ServerResponse(req);
  res.sendDate = false;
  const state = res as unknown as { _header: string | null; outputData: Array<{ data: string | Buffer }> };
  gateway.callback()(req, res);
  for (let k = 0; k < 50 && !res.writableEnded; k++) await settle();
  const head = (state._header ?? '').split('\r\n').filter(Boolean);
  const raw = Buffer.concat(
    state.outputData.map((d) => (typeof d.data === 'string' ? Buffer.from(d.data, 'latin1') : d.data)),
  );
  const body = raw.subarray(raw.indexOf('\r\n\r\n') + 4);
  const status = Number((head[0] ?? '').split(' ')[1]);
  const requestId = res.getHeader('x-request-id');
  const headers = head.slice(1).map((line) => {
    const i = line.indexOf(': ');
    const name = line.slice(0, i);
    // The request id is random per call: the vectors name it.
    const value =
      name.toLowerCase() === 'x-request-id' && line.slice(i + 2) === requestId ? '<id>' : line.slice(i + 2);
    return [name, value];
  });
  return { status, headers, body: body.toString('latin1') };
}

/** An app's answers: status, head lines, body bytes, and whether it comes with a Content-Length. */
const ANSWER_CASES: Array<{ status: number; head: Array<[string, string]>; body: string }> = [
  {
    status: 200,
    head: [
      ['Content-Type', 'application/json'],
      ['Content-Length', '2'],
    ],
    body: '{}',
  },
  { status: 200, head: [['Content-Length', '5']], body: 'hello' },
  {
    status: 200,
    head: [
      ['Content-Type', ''],
      ['Content-Length', '2'],
    ],
    body: 'hi',
  },
  { status: 200, head: [['Transfer-Encoding', 'chunked']], body: 'streamed' },
  {
    status: 200,
    head: [
      ['Content-Type', 'text/plain'],
      ['Transfer-Encoding', 'chunked'],
    ],
    body: 'x',
  },
  {
    status: 201,
    head: [
      ['Content-Type', 'text/plain'],
      ['Content-Length', '0'],
    ],
    body: '',
  },
  {
    status: 204,
    head: [
      ['Content-Type', 'application/json'],
      ['Content-Length', '0'],
    ],
    body: '',
  },
  { status: 204, head: [], body: '' },
  {
    status: 205,
    head: [
      ['Content-Type', 'text/plain'],
      ['X-Kept', '1'],
    ],
    body: '',
  },
  {
    status: 304,
    head: [
      ['ETag', '"1"'],
      ['Content-Type', 'text/plain'],
      ['Content-Length', '10'],
    ],
    body: '',
  },
  { status: 200, head: [['Content-Type', 'text/event-stream']], body: 'data: 1\n\n' },
  {
    status: 200,
    head: [
      ['Content-Type', 'Text/Event-Stream; charset=latin1'],
      ['Cache-Control', 'max-age=5'],
      ['X-A', '1'],
    ],
    body: 'data: 1\n\n',
  },
  {
    status: 200,
    head: [
      ['Content-Type', 'text/event-stream'],
      ['Content-Length', '9'],
    ],
    body: 'data: 1\n\n',
  },
  { status: 200, head: [['Content-Type', 'text/event-streams']], body: 'x' },
  {
    status: 200,
    head: [
      ['Content-Type', 'text/plain'],
      ['Content-Length', String(64 * 1024)],
    ],
    body: 'a'.repeat(64 * 1024),
  },
  {
    status: 200,
    head: [
      ['Content-Type', 'text/plain'],
      ['Content-Length', String(64 * 1024 + 1)],
    ],
    body: 'a'.repeat(64 * 1024 + 1),
  },
  { status: 200, head: [['Content-Length', String(64 * 1024 + 1)]], body: 'a'.repeat(64 * 1024 + 1) },
  {
    status: 200,
    head: [
      ['Content-Type', 'text/plain'],
      ['Content-Length', '+2'],
    ],
    body: 'ab',
  },
  {
    status: 200,
    head: [
      ['Content-Type', 'text/plain'],
      ['Content-Length', '02'],
    ],
    body: 'ab',
  },
  {
    status: 200,
    head: [
      ['Content-Type', 'text/plain'],
      ['Content-Type', 'text/html'],
      ['Set-Cookie', 'a=1'],
      ['Set-Cookie', 'b=2'],
      ['X-Multi', 'a'],
      ['x-multi', 'b'],
      ['Content-Length', '2'],
    ],
    body: 'ok',
  },
  {
    status: 200,
    head: [
      ['Content-Type', 'text/event-stream'],
      ['Content-Type', 'text/plain'],
    ],
    body: 'data: x\n\n',
  },
  {
    status: 200,
    head: [
      ['Content-Type', 'text/plain'],
      ['Content-Type', 'text/event-stream'],
      ['Content-Length', '2'],
    ],
    body: 'ok',
  },
  {
    status: 200,
    head: [
      ['Connection', 'keep-alive, X-Hop'],
      ['Keep-Alive', 'timeout=5'],
      ['X-Hop', '1'],
      ['X-Request-Id', 'app-chosen'],
      ['Content-Length', '2'],
      ['X-End', 'e'],
    ],
    body: 'ok',
  },
  {
    status: 404,
    head: [
      ['Content-Type', 'application/json'],
      ['Content-Length', '2'],
    ],
    body: '{}',
  },
  {
    status: 500,
    head: [
      ['Retry-After', '3'],
      ['Content-Length', '1'],
    ],
    body: 'x',
  },
  {
    status: 200,
    head: [
      ['X-Latin', 'caf\u00e9'],
      ['Content-Length', '1'],
    ],
    body: 'x',
  },
];

async function answerCases() {
  const answer: { current?: AppResponse } = {};
  const gateway = vectorGateway(answer);
  const out = [];
  for (const c of ANSWER_CASES) {
    const headers = parseHeaders(
      c.head.flatMap(([n, v]) => [Buffer.from(n, 'latin1'), Buffer.from(v, 'latin1')]),
    );
    const bytes = Buffer.from(c.body, 'latin1');
    // As the balancer's caller: read whole under SMALL_RESPONSE_BYTES by its Content-Length, else a stream.
    const whole = readsWhole(headers, SMALL_RESPONSE_BYTES);
    answer.current = whole
      ? { statusCode: c.status, headers, whole: bytes }
      : { statusCode: c.status, headers, body: Readable.from(bytes.length > 0 ? [bytes] : []) };
    const sent = await throughGateway(gateway);
    const big = c.body.length > 1000;
    out.push({
      status: c.status,
      head: c.head,
      body: big ? { repeat: c.body[0], times: c.body.length } : c.body,
      whole,
      sent: { ...sent, body: big ? { repeat: sent.body[0], times: sent.body.length } : sent.body },
    });
  }
  await gateway.drain();
  const drain = await throughGateway(gateway);
  await gateway.close();
  return { answers: out, drain: { retryAfterSeconds: 7, sent: drain } };
}

// --- metrics: the data plane's series as prom-client JSON, merged with Node's by aggregate -------------

/** The series the data plane owns (design §5); the rest of Node's registry stays Node's. */
const DATA_PLANE_SERIES = new Set([
  'apphost_gateway_requests_total',
  'apphost_gateway_request_duration_seconds',
  'apphost_gateway_sync_records_skipped_total',
  'apphost_gateway_inflight_requests',
  'apphost_gateway_app_inflight_calls',
  'apphost_gateway_app_queued_calls',
  'apphost_gateway_capacity_rejections_total',
  'apphost_gateway_replica_refusals_total',
]);

type MetricStep =
  | { op: 'call'; project: string; app: string; mode: 'sync' | 'stream'; status: number; seconds: number }
  | { op: 'rejected'; project: string; app: string; code: string }
  | { op: 'refused'; project: string; app: string; reason: string }
  | { op: 'skipped'; reason: 'rate' }
  | {
      op: 'scrape';
      inflight: number;
      apps: Array<{ project: string; app: string; inflight: number; queued: number }>;
    };

/** A Node registry with the gateway's and the balancer's metrics, driven by steps. */
function nodeMetrics() {
  const registry = new Registry();
  let inflight = 0;
  let stats: Array<{ projectId: string; appName: string; inflight: number; queued: number; ready: number }> =
    [];
  const m = createGatewayMetrics(registry, { inflight: () => inflight });
  const b = createBalancerMetrics(registry);
  b.observe({ stats: () => stats } as never);
  return {
    registry,
    async step(s: MetricStep) {
      if (s.op === 'call') m.call(s.project, s.app, s.mode, s.status, s.seconds);
      else if (s.op === 'rejected') b.events(s.project, s.app).rejected?.(s.code);
      else if (s.op === 'refused') b.events(s.project, s.app).refused?.(s.reason);
      else if (s.op === 'skipped') m.syncRecordSkipped(s.reason);
      else {
        inflight = s.inflight;
        stats = s.apps.map((a) => ({
          projectId: a.project,
          appName: a.app,
          inflight: a.inflight,
          queued: a.queued,
          ready: 1,
        }));
        return await registry.getMetricsAsJSON();
      }
      return undefined;
    },
  };
}

function metricSteps(seed: number, n: number): MetricStep[] {
  const rand = seededRandom(seed);
  const pick = <T>(xs: readonly T[]) => xs[rand(xs.length)] as T;
  const apps = [
    ['acme', 'hello'],
    ['acme', 'web'],
    ['zed', 'api'],
    ['', ''],
  ] as const;
  // Each bucket's bound and just over it, and beyond the last.
  const bounds = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
  const seconds = [0, 1e-9, ...bounds, ...bounds.map((b) => b * 1.0001), 1000];
  const steps: MetricStep[] = [];
  for (let k = 0; k < n; k++) {
    // A scrape every 50 steps (the vectors stay small), with the pools' gauges of some apps.
    if (k % 50 === 49) {
      steps.push({
        op: 'scrape',
        inflight: rand(50),
        apps: apps
          .filter(([p]) => p && rand(3))
          .map(([p, a]) => ({ project: p, app: a, inflight: rand(9), queued: rand(4) })),
      });
      continue;
    }
    const [project, app] = pick(apps);
    const r = rand(20);
    if (r < 13)
      steps.push({
        op: 'call',
        project,
        app,
        mode: pick(['sync', 'stream'] as const),
        status: pick([200, 201, 204, 400, 404, 499, 502, 503, 504]),
        seconds: rand(2) ? pick(seconds) : rand(1_000_000) / 1000,
      });
    else if (r < 16 && project)
      steps.push({ op: 'rejected', project, app, code: pick(['queue_full', 'queue_timeout']) });
    else if (r < 19 && project)
      steps.push({
        op: 'refused',
        project,
        app,
        reason: pick(['at_capacity', 'shutting_down', 'unreachable']),
      });
    else steps.push({ op: 'skipped', reason: 'rate' });
  }
  steps.push({ op: 'scrape', inflight: 0, apps: [] });
  return steps;
}

/**
 * Node's own registry (its calls: hand-offs, async) and a second registry counting what the data plane
 * counted: at each scrape, the second's JSON restricted to the data plane's series (what Rust must
 * render) and the text of `AggregatorRegistry.aggregate([node, dataPlane])` (what /metrics shows).
 */
async function metricCases() {
  const node = nodeMetrics();
  for (const s of metricSteps(0x40de, 60)) await node.step(s);
  const nodeJson = await node.registry.getMetricsAsJSON();
  const runs = [];
  for (const seed of [0x3e7a, 0x3e7b]) {
    const dp = nodeMetrics();
    const steps = [];
    for (const s of metricSteps(seed, 150)) {
      const json = await dp.step(s);
      if (!json) steps.push(s);
      else {
        // A copy: prom-client's JSON holds its live value objects, which later steps change.
        const own = JSON.parse(JSON.stringify(json.filter((m) => DATA_PLANE_SERIES.has(m.name))));
        const text = await AggregatorRegistry.aggregate([nodeJson, own]).metrics();
        steps.push({ ...s, json: own, text });
      }
    }
    runs.push({ seed, steps });
  }
  return { node: nodeJson, runs };
}

// --- write or check --------------------------------------------------------------------------------

const files: Record<string, unknown> = {
  'body.json': { maxJsonDepth: MAX_JSON_DEPTH, cases: [...BODY_CASES, ...bodyCorpus()].map(bodyVector) },
  'route.json': { cases: ROUTE_CASES.map(routeVector) },
  'request-headers.json': {
    requestId: 'req-0001',
    cases: REQUEST_HEADER_CASES.map((raw) => {
      const node = nodeHeaders(raw);
      return { in: raw, node, out: forwardRequestHeaders(node, 'req-0001') };
    }),
  },
  'response-headers.json': {
    cases: RESPONSE_HEADER_CASES.map((raw) => {
      const node = nodeHeaders(raw);
      return { in: raw, node, out: forwardResponseHeaders(node) };
    }),
  },
  'query.json': { cases: QUERY_CASES.map((q) => ({ in: q, out: forwardQuery(q) })) },
  'auth.json': { cases: AUTH_CASES.map(authVector) },
  'pick.json': { cases: pickCases() },
  'pool-settings.json': { cases: poolSettingsCases() },
  'errors.json': { cases: [errorCases()] },
  'meter.json': { cases: meterCases() },
  'records.json': { cases: recordCases() },
  'place.json': { cases: await placeCases() },
  'pool.json': { cases: await poolCases() },
  'tokens.json': { cases: await tokenCases() },
  // The control channel (src/gateway/dataplane/protocol.ts): each case's bytes fed to a reader at `at`,
  // then the channel's end; `messages` are what it reads (extra fields dropped), `error` the refusal's
  // code after them (null: none), `layer` which part of a reader refuses it (see frame-cases.ts).
  'frames.json': {
    maxFrameBytes: DATAPLANE_MAX_FRAME_BYTES,
    cases: FRAME_CASES.map((c) => ({
      name: c.name,
      at: c.at,
      hex: c.wire.toString('hex'),
      ...readCase(c),
      ...(c.layer ? { layer: c.layer } : {}),
    })),
  },
  'metrics.json': await (async () => {
    const { node, runs } = await metricCases();
    return { node, cases: runs };
  })(),
  'access-log.json': (() => {
    const inputs = accessCases();
    const lines = accessLines('info', inputs);
    return { levels: accessLevels(), cases: inputs.map((i, k) => ({ in: i, line: lines[k] })) };
  })(),
  'upstream-failures.json': { cases: upstreamFailureCases() },
  'refused.json': { cases: refusedCases() },
  'hostname.json': { cases: hostCases() },
  'answers.json': { cases: [await answerCases()] },
};

/** One case a line, so a rule change shows in the diff as the cases it changed. */
function render({ cases, ...rest }: { cases: unknown[] }): string {
  const head = JSON.stringify(rest).slice(0, -1);
  const lines = cases.map((c) => JSON.stringify(c)).join(',\n');
  return `${head}${head === '{' ? '' : ','}"cases":[\n${lines}\n]}\n`;
}

const check = process.argv.includes('--check');
const stale: string[] = [];
for (const [name, value] of Object.entries(files)) {
  const text = render(value as { cases: unknown[] });
  const path = join(DIR, name);
  if (!check) writeFileSync(path, text);
  else {
    let now = '';
    try {
      now = readFileSync(path, 'utf8');
    } catch {}
    if (now !== text) stale.push(path);
  }
}
if (stale.length > 0) {
  console.error(
    `the data plane's test vectors differ from what the TypeScript rules give now: ${stale.join(', ')}\n` +
      'run `node hack/dataplane-vectors.ts` and make the Rust modules agree (docs/design/native-data-plane.md §7)',
  );
  process.exit(1);
}
