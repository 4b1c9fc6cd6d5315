/**
 * Parity (design §7): one table of requests goes to a gateway in node mode and one in native mode (the
 * Rust data plane on the port, handing to Node's hand-off server: entry.ts as dataplane-native.test.ts
 * starts it), both in front of the same real Python apps — the Cortex runtime and a custom app
 * (fixtures/echo_server.py) that answers with the request it received. Each row's answers must be the
 * same: status, headers (names lower-cased; `Date` left out; `X-Request-Id` checked for shape, then
 * replaced by `<id>` there and in the body; `Connection: keep-alive` and `Keep-Alive` left out, which
 * Node writes for itself and the data plane drops as hop-by-hop, design §4 "Hand-off hop", while
 * `Connection: close` is compared) and body bytes. While the data plane hands every call to Node (step
 * 4) parity holds by construction; once it serves calls itself (step 5) this is what holds it to Node.
 * The two are entry.ts processes, as main.ts builds the gateway (settings from the environment, the
 * token feed through serve.ts's onRemember, the run worker for the async rows), not frontGateway.
 * Error rows name their code first (`not_found: …`) and Node's answer must carry it. Not in the table:
 * `shutting_down` (a draining gateway: dataplane-native.test.ts and answer.rs's drain vectors),
 * `queue_unavailable` (async only), `gateway_unavailable` (native only).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { effectiveScaling } from '../../../src/apis/v1alpha1/scaling.ts';
import { createSyncCallReader } from '../../../src/runs/sync-call-reader.ts';
import type { RunRecord } from '../../../src/shared/contracts/messaging.ts';
import { ErrorCode } from '../../../src/shared/errors.ts';
import { generateSigningKey, issueRunToken, type SigningKey } from '../../../src/shared/run-tokens.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { freePort, type ManagedProcess, startProcess, waitFor } from '../../harness/process.ts';
import { buildDataPlane, noCargo } from './dataplane-binary.ts';
import { PYTHON, REPO_ROOT, type Runtime, resolvedApp, startRuntime, tempDir } from './helpers.ts';

const P = 'proj-parity';
const OTHER = 'proj-other';
const START_TIMEOUT_MS = 60_000;
const MAX_BODY = 64 * 1024;
/** The slot-holding call must outlast the queued call's wait: QUEUE_TIMEOUT_MS well under SYNC_TIMEOUT_MS. */
const SYNC_TIMEOUT_MS = 1_500;
const QUEUE_TIMEOUT_MS = 400;
const skip = noCargo();

type Front = 'node' | 'native';

interface Row {
  name: string;
  method?: 'POST' | 'GET' | 'PUT';
  /** After `http://host:port`. */
  path: string;
  /** Flat name/value list (repeats allowed), sent as is; host, authorization and content-type are added unless named. */
  headers?: string[];
  body?: string | Buffer;
  /** Sent as a chunked stream of these pieces (no Content-Length). */
  chunks?: string[];
  /** `fresh`: a token of the project issued for this send, which the data plane has not seen (a token miss). */
  token?: 'own' | 'other' | 'none' | 'garbage' | 'fresh';
  /**
   * A difference found between the two and posted on the board to its owner: the row is expected to
   * fail (it.fails) until the owner fixes it, and then goes red so that the mark is removed.
   */
  finding?: string;
  /**
   * A documented difference in the head only: these header lines, in native's answers only, are left
   * out before the answers are compared (the comment at the row says why).
   */
  nativeOnlyHeaders?: Array<[string, string]>;
  /** Hold the `single` app's one slot (and fill its queue of one) while this row is sent. */
  holdSlot?: boolean;
}

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** The error code a row's name starts with (`code: why` or `code (more)`). */
const codeOf = (name: string) => /^([a-z_]+)(?::| \(|$)/.exec(name)?.[1];
/** Header lines sorted by name, a name's lines in their order (Array.prototype.sort is stable). */
const byName = (h: Array<[string, string]>) => [...h].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
const isKeepAlive = (name: string, value: string) =>
  name === 'connection' && value.toLowerCase() === 'keep-alive';
/** fixtures/echo_server.py's report of the request it received, if `body` is one. */
function echoReport(body: string): { headers: Array<[string, string]> } | undefined {
  if (!body.startsWith('{"method": ')) return undefined;
  return JSON.parse(body) as { headers: Array<[string, string]> };
}
const deep = (n: number) => `{"a":${'['.repeat(n)}${']'.repeat(n)}}`;
/** A custom domain of P, assigned to the `echo` app. */
const DOMAIN = 'echo.parity-test.example';
const hello = (fn: string, q = '') => `/v4/${P}/hello/${fn}${q}`;
const echo = (path: string) => `/v4/${P}/echo/${path}`;

const ROWS: Row[] = [
  // The usual calls and what the app received.
  { name: 'a Cortex call', path: hello('echo'), body: '{"x":1,"y":[true,null,"ä"]}' },
  {
    name: 'a custom app receives method, path, query, headers and body',
    path: echo('a/b?q=1'),
    body: 'raw body',
  },
  {
    // The path names hello, whose token the data plane knows: the domain's app gets the whole path.
    name: "a custom domain: the whole path goes to the domain's app, not to the app it names",
    path: hello('echo'),
    headers: ['host', 'Echo.Parity-Test.example:8443'],
    body: '{"x":1}',
  },
  {
    name: 'duplicate request headers (first kept, joined, cookie with ;)',
    path: echo('dup'),
    body: 'd',
    headers: [
      'x-dup',
      'a',
      'x-dup',
      'b',
      'user-agent',
      'ua-1',
      'user-agent',
      'ua-2',
      'cookie',
      'c=1',
      'cookie',
      'd=2',
      'accept',
      'text/plain',
      'accept',
      'application/json',
    ],
  },
  {
    name: 'Connection-listed and hop-by-hop request headers dropped',
    path: echo('hop'),
    body: 'h',
    headers: [
      'connection',
      'x-drop-me, keep-alive',
      'x-drop-me',
      '1',
      'keep-alive',
      'timeout=5',
      'x-kept',
      'yes',
      'te',
      'trailers',
    ],
  },
  {
    name: 'a Connection-listed Authorization still authorizes (a known token: served in Rust)',
    path: echo('hop'),
    body: 'h',
    headers: ['connection', 'Authorization, x-drop-me', 'x-drop-me', '1'],
  },
  {
    // Handed off (token_miss): the hop to Node must keep the listed header, and say it was listed.
    name: 'a Connection-listed Authorization still authorizes (a token not seen yet: handed off)',
    path: echo('hop'),
    body: 'h',
    token: 'fresh',
    headers: ['connection', 'Authorization, x-drop-me', 'x-drop-me', '1'],
  },
  {
    name: 'a query re-serialised (a=%20&b&c=ä)',
    path: echo(`q?a=%20&b&c=${encodeURIComponent('ä')}`),
    body: 'q',
  },
  { name: 'a query with + and %2B', path: echo('q?d=1+2&e=%2B&f=%C3%A4&&g=='), body: 'q' },
  {
    name: 'a raw non-ASCII byte in the request target (both refuse it)',
    path: echo('q?c=ä'),
    finding:
      'dataplane-4rs: hyper’s parse-error 400 carries Content-Length: 0, Node’s (llhttp via http.Server) has none; both Connection: close and no body',
  },
  {
    name: 'percent-encoded project and app names',
    path: `/v4/${P.replace('p', '%70')}/%68ello/echo`,
    body: '{}',
  },
  {
    name: 'a percent-encoded async name (%61sync=false) is ours',
    path: hello('echo', '?%61sync=false&keep=1'),
    body: '{}',
  },
  { name: 'our parameters removed, the rest kept', path: echo('q?async=false&z=9'), body: 'q' },
  { name: 'an empty Cortex body', path: hello('echo'), body: '' },
  // node:http's maxHeaderSize (16 KiB, the gateway sets none): past it Node answers a bare 431 and the
  // app never sees the call; the data plane's bound is server.rs's MAX_HEAD_BYTES. hyper's own 431 says
  // `Content-Length: 0` where Node's has no length (an empty body ended by the close): the same answer.
  {
    name: 'a request head over 16 KiB (a long Cookie; a known token)',
    path: echo('big-head'),
    headers: ['cookie', `a=${'x'.repeat(17 * 1024)}`],
    body: 'q',
    nativeOnlyHeaders: [['content-length', '0']],
  },
  {
    name: 'a request head over 16 KiB (a long Cookie; a token not seen yet)',
    path: echo('big-head'),
    headers: ['cookie', `a=${'x'.repeat(17 * 1024)}`],
    body: 'q',
    token: 'fresh',
    nativeOnlyHeaders: [['content-length', '0']],
  },
  { name: 'a blank Cortex body', path: hello('echo'), body: ' \r\n\t ' },
  { name: 'an empty custom body', path: echo('empty'), body: '' },
  { name: 'a chunked request body', path: echo('chunked'), chunks: ['{"a":', '1', '}'] },
  { name: 'a chunked Cortex body', path: hello('echo'), chunks: ['{"a":', '[1,2]', '}'] },
  { name: 'a body nested 500 deep', path: hello('echo'), body: deep(500) },
  // The app's answers.
  { name: "an app's 204", path: echo('no-content') },
  { name: 'an answer without Content-Type', path: echo('no-type') },
  { name: 'a 100 KiB answer', path: echo('big') },
  { name: 'a Cortex 100 KiB answer', path: hello('big'), body: JSON.stringify({ size: 100 * 1024 }) },
  { name: 'repeated answer header lines', path: echo('dup-answer') },
  { name: 'SSE from a custom app', path: echo('sse'), headers: ['accept', 'text/event-stream'] },
  {
    name: 'SSE from Cortex',
    path: hello('ticks'),
    headers: ['accept', 'text/event-stream'],
    body: '{"count":3}',
  },
  { name: 'a Cortex error (the app raised)', path: hello('boom'), body: '{"message":"no"}' },
  // Handed off in step 5 too: identical by construction, which is itself checked here.
  { name: '?async=true (202, run id substituted)', path: hello('echo', '?async=true'), body: '{"a":1}' },
  {
    name: 'a sync call with webhookEndpoint',
    path: hello('echo', `?webhookEndpoint=${encodeURIComponent('http://127.0.0.1:9/hook')}`),
    body: '{"a":1}',
  },
  {
    name: 'async with webhookEndpoint',
    path: hello('echo', `?async=1&webhookEndpoint=${encodeURIComponent('https://example.com/hook')}`),
    body: '{}',
  },
  // docs/gateway.md's error table, each row a sync call can reach.
  { name: 'invalid_body: not an object', path: hello('echo'), body: '[1]' },
  { name: 'invalid_body: not JSON', path: hello('echo'), body: '{"a":' },
  { name: 'invalid_body: 1e999999', path: hello('echo'), body: '{"a":1e999999}' },
  { name: 'invalid_body: nested 513 deep', path: hello('echo'), body: deep(513) },
  {
    name: 'invalid_body: not UTF-8',
    path: hello('echo'),
    body: Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]),
  },
  { name: 'invalid_webhook_endpoint', path: hello('echo', '?webhookEndpoint=ftp%3A%2F%2Fx'), body: '{}' },
  { name: 'bad_request: async=maybe', path: hello('echo', '?async=maybe'), body: '{}' },
  { name: 'bad_request: an encoded slash in the path', path: echo('a%2Fb') },
  { name: 'bad_request: a dot segment in the path', path: echo('a/../b') },
  { name: 'bad_request: bad percent-encoding in a name', path: `/v4/${P}/%zz/echo`, body: '{}' },
  { name: 'unauthenticated: no token', path: hello('echo'), body: '{}', token: 'none' },
  { name: 'unauthenticated: a bad token', path: hello('echo'), body: '{}', token: 'garbage' },
  {
    name: 'unauthenticated: a non-bearer scheme',
    path: hello('echo'),
    body: '{}',
    headers: ['authorization', 'Basic Zm9vOmJhcg=='],
  },
  { name: 'not_found: an unknown app', path: `/v4/${P}/nope/echo`, body: '{}' },
  { name: 'not_found: an unknown Cortex function', path: hello('nope'), body: '{}' },
  { name: 'not_found: a token of another project', path: hello('echo'), body: '{}', token: 'other' },
  { name: 'not_found: not a run path', path: '/v3/x', body: '{}' },
  { name: 'not_found: a name that is no DNS label', path: `/v4/${P}/Hello/echo`, body: '{}' },
  { name: 'method_not_allowed: GET', method: 'GET', path: hello('echo') },
  { name: 'method_not_allowed: PUT', method: 'PUT', path: hello('echo'), body: '{}' },
  {
    name: 'payload_too_large: Content-Length over the bound',
    path: echo('big-in'),
    body: 'z'.repeat(MAX_BODY + 1),
  },
  {
    name: 'payload_too_large: a chunked body over the bound',
    path: echo('big-in'),
    chunks: ['z'.repeat(MAX_BODY / 2), 'z'.repeat(MAX_BODY / 2), 'z'],
  },
  { name: 'upstream_unreachable', path: `/v4/${P}/down/echo`, body: '{}' },
  { name: 'app_not_ready: the replica is shutting down', path: echo('refuse') },
  { name: 'cold_start_timeout', path: `/v4/${P}/starting/echo`, body: '{}' },
  { name: 'app_start_failed', path: `/v4/${P}/broken/echo`, body: '{}' },
  {
    name: 'upstream_timeout',
    path: hello('sleep'),
    body: JSON.stringify({ seconds: SYNC_TIMEOUT_MS / 1000 + 0.5 }),
  },
  {
    name: 'queue_full (and the queued call’s queue_timeout)',
    path: `/v4/${P}/single/echo`,
    body: '{}',
    // The queue is the data plane's own (step 6): the held call, the queued one's queue_timeout and the
    // third call's queue_full at once, each byte for byte as Node's.
    holdSlot: true,
  },
];

interface Answer {
  status: number;
  /** [lower-cased name, value] per header line. */
  headers: Array<[string, string]>;
  body: string;
}

/** Kept-alive connections, as a usual caller keeps them (a 413 or shutting_down closes its own). */
const agent = new Agent({ keepAlive: true });

describe.skipIf(!!skip)(
  `parity of the node and native data planes${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const dir = tempDir('apphost-parity-');
    let nats: NatsServer;
    let runtime: Runtime;
    /** The `single` app's replica: one call at a time, the rest refused 429 at_capacity, as in a cluster. */
    let single: Runtime;
    let echoApp: ManagedProcess;
    const children: ChildProcess[] = [];
    const base = {} as Record<Front, string>;
    /** Each gateway's ops port (/metrics). */
    const ops = {} as Record<Front, string>;
    const tokens = {} as Record<'own' | 'other', string>;
    let keys: { keys: SigningKey[] };
    let issued = 0;
    /** Each front's request ids by row (the answers' X-Request-Id), for the sync-call records after the table. */
    const sent = { node: new Map(), native: new Map() } as Record<Front, Map<string, string[]>>;
    let nc: NatsConnection;

    async function startGateway(front: Front, apps: unknown, bin: string): Promise<string> {
      const [port, opsPort] = await Promise.all([freePort(), freePort()]);
      const keysFile = join(dir, 'run-token-keys.json');
      const frontDir = tempDir(`apphost-parity-${front}-`);
      const child = spawn(process.execPath, [join(REPO_ROOT, 'test/integration/gateway/entry.ts')], {
        env: {
          ...process.env,
          NATS_URL: nats.url,
          APPHOST_LOG_LEVEL: 'warn',
          APPHOST_OPS_PORT: String(opsPort),
          APPHOST_GATEWAY_PORT: String(port),
          APPHOST_GATEWAY_HOST: '127.0.0.1',
          APPHOST_PLATFORM_KEY: 'parity-test-platform-key-0123',
          APPHOST_RUN_TOKEN_KEYS_FILE: keysFile,
          APPHOST_GATEWAY_DATA_PLANE: front,
          APPHOST_GATEWAY_DATA_PLANE_BIN: bin,
          APPHOST_GATEWAY_DATA_PLANE_DIR: frontDir,
          APPHOST_GATEWAY_MAX_BODY_BYTES: String(MAX_BODY),
          APPHOST_GATEWAY_SYNC_TIMEOUT_MS: String(SYNC_TIMEOUT_MS),
          APPHOST_GATEWAY_COLD_START_TIMEOUT_MS: '300',
          APPHOST_GATEWAY_QUEUE_TIMEOUT_MS: String(QUEUE_TIMEOUT_MS),
          APPHOST_GATEWAY_QUEUE_DEPTH_FACTOR: '1',
          APPHOST_GATEWAY_UNREACHABLE_BLOCK_MS: '20',
          APPHOST_GATEWAY_CAPACITY_BLOCK_MS: '20',
          // Every call of the table gets its sync-call record (compared after the table).
          APPHOST_GATEWAY_SYNC_RECORDS_PER_APP_PER_SECOND: '1000',
          APPHOST_GATEWAY_SYNC_RECORDS_PER_SECOND: '10000',
          APPHOST_TEST_APPS: JSON.stringify(apps),
          APPHOST_TEST_HOSTS: JSON.stringify({ [DOMAIN]: { projectId: P, appName: 'echo' } }),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      ops[front] = `http://127.0.0.1:${opsPort}`;
      const log = createWriteStream(join(frontDir, 'gateway.log'));
      child.stdout?.pipe(log);
      child.stderr?.pipe(log);
      await waitFor(
        `the ${front} gateway ready (log: ${join(frontDir, 'gateway.log')})`,
        async () => (await fetch(`http://127.0.0.1:${opsPort}/readyz`)).ok,
        START_TIMEOUT_MS,
      );
      return `http://127.0.0.1:${port}`;
    }

    beforeAll(async () => {
      const bin = buildDataPlane();
      const echoPort = await freePort();
      [nats, runtime, single] = await Promise.all([
        startNats(),
        startRuntime(),
        startRuntime(undefined, ['--max-concurrency', '1']),
      ]);
      echoApp = startProcess(
        'echo-app',
        PYTHON,
        [join(REPO_ROOT, 'test/integration/gateway/fixtures/echo_server.py'), String(echoPort)],
        {
          logFile: join(dir, 'echo.log'),
        },
      );
      const echoUrl = `http://127.0.0.1:${echoPort}`;
      await waitFor('the echo app', async () => (await fetch(`${echoUrl}/ping`)).ok, START_TIMEOUT_MS);
      nc = await connect({ servers: nats.url });
      keys = { keys: [await generateSigningKey()] };
      writeFileSync(join(dir, 'run-token-keys.json'), JSON.stringify(keys));
      const exp = new Date(Date.now() + 3600_000);
      tokens.own = await issueRunToken(keys, P, exp);
      tokens.other = await issueRunToken(keys, OTHER, exp);
      const apps = [
        resolvedApp(P, 'hello', runtime.url, { functions: ['echo', 'sleep', 'boom', 'ticks', 'big'] }),
        resolvedApp(P, 'echo', echoUrl, { runtime: 'custom' }),
        resolvedApp(P, 'down', `http://127.0.0.1:${await freePort()}`),
        resolvedApp(P, 'starting', runtime.url, { ready: false }),
        resolvedApp(P, 'broken', runtime.url, {
          ready: false,
          startFailure: { reason: 'ImportError', message: 'main.py: No module named nope' },
        }),
        resolvedApp(P, 'single', single.url, {
          scaling: effectiveScaling({ replicaConcurrency: 1, maxReplicas: 1 }),
        }),
        resolvedApp(OTHER, 'hello', runtime.url),
      ];
      [base.node, base.native] = await Promise.all([
        startGateway('node', apps, bin),
        startGateway('native', apps, bin),
      ]);
    });

    afterAll(async () => {
      for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
      await nc?.close();
      await echoApp?.stop(5_000);
      await runtime?.proc.stop(5_000);
      await single?.proc.stop(5_000);
      await nats?.stop();
    });

    /** One request as the row says, sent raw with node:http (undici would resolve `..` and refuse `Keep-Alive`). */
    async function send(front: Front, row: Row): Promise<Answer> {
      // The head exactly as listed (setDefaultHeaders: false): each line its own, even a repeated
      // Cookie, which Node's client would otherwise join; the framing headers are written here.
      const { hostname, port, host } = new URL(base[front]);
      const own = row.headers ?? [];
      const named = new Set(own.filter((_, i) => i % 2 === 0));
      const token =
        row.token === 'fresh'
          ? await issueRunToken(keys, P, new Date(Date.now() + 3600_000 + ++issued * 1000))
          : { own: tokens.own, other: tokens.other, garbage: 'not-a-token', none: undefined }[
              row.token ?? 'own'
            ];
      const headers = named.has('host') ? [] : ['host', host];
      if (token && !named.has('authorization')) headers.push('authorization', `Bearer ${token}`);
      if (!named.has('content-type') && row.method !== 'GET')
        headers.push('content-type', 'application/json');
      if (row.body !== undefined) headers.push('content-length', String(Buffer.byteLength(row.body)));
      if (row.chunks) headers.push('transfer-encoding', 'chunked');
      headers.push(...own);
      const res = await new Promise<IncomingMessage>((resolve, reject) => {
        // The path as written: a URL would resolve `..` before it is sent.
        const method = row.method ?? 'POST';
        const req = httpRequest(
          { hostname, port, path: row.path, method, headers, agent, setDefaultHeaders: false },
          resolve,
        );
        req.on('error', reject);
        for (const chunk of row.chunks ?? []) req.write(chunk);
        req.end(row.body);
      });
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      const requestId = res.headers['x-request-id'];
      if (typeof requestId === 'string')
        sent[front].set(row.name, [...(sent[front].get(row.name) ?? []), requestId]);
      const pairs: Array<[string, string]> = [];
      for (let i = 0; i < res.rawHeaders.length; i += 2)
        pairs.push([String(res.rawHeaders[i]).toLowerCase(), String(res.rawHeaders[i + 1])]);
      return normalise({
        status: res.statusCode ?? 0,
        headers: pairs,
        body: Buffer.concat(chunks).toString('latin1'),
      });
    }

    /**
     * The answer as compared (see the file's header): header lines lower-cased and sorted by name, a name's
     * lines kept in their order; the request id replaced in the head and the body. The echo app's report
     * of the request it received is compared the same way (its header lines sorted by name, the
     * connection's own `Connection: keep-alive` left out, as undici sends it and hyper does not): its
     * `Content-Length` is checked against the body, then replaced, as the report's length follows.
     */
    function normalise(a: Answer): Answer {
      // Replaced only when it has a UUID v4's shape: any other id stays, and differs between the two.
      const id = a.headers.find(([n, v]) => n === 'x-request-id' && UUID_V4.test(v))?.[1];
      let body = id ? a.body.replaceAll(id, '<id>') : a.body;
      const received = echoReport(body);
      if (received) {
        expect(a.headers.find(([n]) => n === 'content-length')?.[1]).toBe(
          String(Buffer.byteLength(a.body, 'latin1')),
        );
        received.headers = byName(received.headers.filter(([n, v]) => !isKeepAlive(n, v)));
        body = JSON.stringify(received);
      }
      const headers = byName(
        a.headers
          .filter(([n, v]) => n !== 'date' && n !== 'keep-alive' && !isKeepAlive(n, v))
          .map(([n, v]): [string, string] => [
            n,
            v === id ? '<id>' : received && n === 'content-length' ? '<echo>' : v,
          ]),
      );
      return { ...a, headers, body };
    }

    /** Both fronts, in turn; with `holdSlot`, the `single` app's slot held and its queue of one filled. */
    async function answers(row: Row): Promise<Record<Front, Answer[]>> {
      const out = {} as Record<Front, Answer[]>;
      for (const front of ['node', 'native'] as const) {
        if (!row.holdSlot) {
          out[front] = [await send(front, row)];
          continue;
        }
        const gate = join(dir, `gate-${front}-${row.name.length}`);
        const marker = `${gate}.started`;
        const held = send(front, {
          ...row,
          path: `/v4/${P}/single/gated`,
          body: JSON.stringify({ gate, marker }),
        });
        await waitFor('the slot held', async () => existsSync(marker), 10_000, 10);
        const queued = send(front, row);
        await new Promise((r) => setTimeout(r, 200));
        const refused = await send(front, row);
        const timedOut = await queued;
        writeFileSync(gate, '');
        out[front] = [refused, timedOut, await held];
      }
      return out;
    }

    const title = (r: Row) => (r.finding ? `${r.name} [FINDING, ${r.finding}]` : r.name);
    const compare = async (row: Row) => {
      const { name } = row;
      const got = await answers(row);
      const { node } = got;
      const only = row.nativeOnlyHeaders ?? [];
      const native = got.native.map((a) => ({
        ...a,
        headers: a.headers.filter(([n, v]) => !only.some(([on, ov]) => on === n && ov === v)),
      }));
      // An error row is one only if Node answers that error (else a typo in the table tests nothing).
      const code = codeOf(name);
      if (code && (Object.values(ErrorCode) as string[]).includes(code))
        expect(JSON.parse(node[0]?.body ?? '{}').error?.code, 'Node’s answer').toBe(code);
      if (row.holdSlot) {
        expect(node.map((a) => a.status)).toEqual([503, 503, 200]);
        expect(JSON.parse(node[1]?.body ?? '{}').error?.code, 'the queued call').toBe('queue_timeout');
      }
      expect(native).toEqual(node);
    };
    for (const row of ROWS) (row.finding ? it.fails : it)(title(row), () => compare(row));

    it("after the table, /metrics counts every call alike: each request and duration series of node mode, same labels, same count (the data plane's series summed into Node's)", async () => {
      // After every row (the file's order; run alone, node mode has counted nothing and this fails).
      // Counts only: the durations differ between the two.
      const texts = {} as Record<Front, string>;
      const counted = async (front: Front) => {
        const text = await (await fetch(`${ops[front]}/metrics`)).text();
        texts[front] = text;
        return text
          .split('\n')
          .filter(
            (l) =>
              l.startsWith('apphost_gateway_requests_total{') ||
              l.startsWith('apphost_gateway_request_duration_seconds_count{'),
          )
          .sort();
      };
      const node = await counted('node');
      expect(node.length).toBeGreaterThan(10);
      expect(await counted('native')).toEqual(node);
      // Node mode's /metrics is its registry as before: no data plane series, its own process_* kept.
      expect(texts.node).not.toContain('apphost_gateway_dataplane_');
      expect(texts.node).toMatch(/^process_start_time_seconds \d/m);
      expect(texts.native).toMatch(/^apphost_gateway_dataplane_up 1$/m);
    });

    it('after the table, each row’s sync-call records are the same in both modes (the data plane’s `records` frames, published by Node)', async () => {
      // After every row, as the /metrics test. Records of the calls Rust served come over the channel in
      // batches (≤ 10 ms), then Node publishes them: wait until native has as many as node mode, up to 10 s.
      const reader = createSyncCallReader(nc, { timeoutMs: 5_000 });
      const recorded = async () => {
        const all = [
          ...(await reader.list(P, undefined, { limit: 10_000 })),
          ...(await reader.list(OTHER, undefined, { limit: 10_000 })),
        ];
        return new Map(all.map((r) => [r.runId, r]));
      };
      // Without the ids, the times and the run id, sorted within a row (its calls may end in any order).
      const ofRow = (byId: Map<string, RunRecord>, front: Front) =>
        new Map(
          [...sent[front]].map(([row, ids]) => [
            row,
            ids
              .map((id) => byId.get(id))
              .filter((r): r is RunRecord => r !== undefined)
              .map(({ runId: _r, createdAt: _c, startedAt: _s, finishedAt: _f, ...rest }) =>
                JSON.stringify(rest),
              )
              .sort(),
          ]),
        );
      const count = (m: Map<string, string[]>) => [...m.values()].reduce((n, v) => n + v.length, 0);
      let byId = await recorded();
      for (let t = Date.now(); Date.now() - t < 10_000; byId = await recorded()) {
        if (count(ofRow(byId, 'native')) >= count(ofRow(byId, 'node'))) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      const node = ofRow(byId, 'node');
      // Most rows' calls have a record (the rows refused before an app is resolved have none, in both).
      expect(count(node)).toBeGreaterThan(20);
      expect(Object.fromEntries(ofRow(byId, 'native'))).toEqual(Object.fromEntries(node));
    });

    it('a caller that hangs up while the app works: the same sync-call record in both modes (aborted, cancelled)', async () => {
      const reader = createSyncCallReader(nc, { timeoutMs: 5_000 });
      const gone = async (front: Front) => {
        const { hostname, port, host } = new URL(base[front]);
        const body = JSON.stringify({ seconds: 0.6 });
        const since = Date.now();
        await new Promise<void>((resolve) => {
          const req = httpRequest({
            hostname,
            port,
            path: hello('sleep'),
            method: 'POST',
            headers: {
              host,
              authorization: `Bearer ${tokens.own}`,
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(body),
            },
          });
          req.on('error', () => resolve());
          req.end(body);
          // Gone while the app sleeps, before any answer.
          setTimeout(() => {
            req.destroy();
            resolve();
          }, 200);
        });
        let record: RunRecord | undefined;
        await waitFor(
          `${front}: the record of the call whose caller went away`,
          async () => {
            record = (await reader.list(P, 'hello', { limit: 100 })).find(
              (r) => r.path === 'sleep' && Date.parse(r.startedAt ?? '') >= since,
            );
            return record !== undefined;
          },
          10_000,
        );
        const { runId: _r, createdAt: _c, startedAt: _s, finishedAt: _f, ...rest } = record as RunRecord;
        return rest;
      };
      const node = await gone('node');
      expect(node).toMatchObject({ state: 'cancelled', error: { code: 'client_closed' } });
      expect(await gone('native')).toEqual(node);
    });

    it('the table reaches the error table’s sync rows (a row gone would go unnoticed)', () => {
      const codes = ROWS.map((r) => codeOf(r.name));
      for (const code of [
        'invalid_body',
        'invalid_webhook_endpoint',
        'bad_request',
        'unauthenticated',
        'not_found',
        'method_not_allowed',
        'payload_too_large',
        'upstream_unreachable',
        'app_not_ready',
        'cold_start_timeout',
        'app_start_failed',
        'upstream_timeout',
        'queue_full',
      ])
        expect(codes).toContain(code);
    });
  },
);
