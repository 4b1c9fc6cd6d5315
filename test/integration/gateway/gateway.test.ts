/**
 * The gateway against the real Python runtime and a private NATS server: sync calls, the error paths,
 * SSE pass-through, custom domains and webhook jobs after sync calls.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders, Server } from 'node:http';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { effectiveScaling } from '../../../src/apis/v1alpha1/scaling.ts';
import { createBalancer, DEFAULT_BALANCER_SETTINGS } from '../../../src/gateway/balancer/balancer.ts';
import { createGateway, type Gateway } from '../../../src/gateway/gateway.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../../../src/gateway/settings.ts';
import { WEBHOOKS_STREAM, type WebhookJob } from '../../../src/shared/contracts/messaging.ts';
import type { ResolvedApp } from '../../../src/shared/contracts/seams.ts';
import { createLogger, silentLogger } from '../../../src/shared/log.ts';
import {
  createRunTokenVerifier,
  generateSigningKey,
  issueRunToken,
  type KeySet,
} from '../../../src/shared/run-tokens.ts';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { ensureWebhooksConsumer, WEBHOOKS_CONSUMER } from '../../../src/webhooks/stream.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { freePort, waitFor } from '../../harness/process.ts';
import {
  closeServer,
  frontGateway,
  frontVerifier,
  listen,
  type Runtime,
  resolvedApp,
  startRuntime,
  staticResolver,
  tempDir,
} from './helpers.ts';

const P = 'proj-a';
const SYNC_TIMEOUT_MS = 4_000;
const MAX_BODY = 64 * 1024;

let nats: NatsServer;
let nc: NatsConnection;
let runtime: Runtime;
let keys: KeySet;
let token: string;
let gateway: Gateway;
let server: Server;
let base: string;
let recorder: { server: Server; url: string };
const seen: Array<{ url: string; headers: IncomingHttpHeaders }> = [];
const secretBox = createSecretBox('test-platform-key-0123456789');
const resolver = staticResolver([]);
const dir = tempDir('apphost-gw-');

const app = (name: string, over: Partial<ResolvedApp> = {}) => resolvedApp(P, name, runtime.url, over);

async function call(
  path: string,
  opts: {
    body?: string;
    token?: string | null;
    headers?: Record<string, string>;
    method?: 'POST' | 'GET';
  } = {},
) {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...opts.headers };
  const t = opts.token === undefined ? token : opts.token;
  if (t !== null) headers.authorization = `Bearer ${t}`;
  const res = await request(`${base}${path}`, {
    method: opts.method ?? 'POST',
    headers,
    ...(opts.method === 'GET' ? {} : { body: opts.body ?? '{}' }),
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, json: () => JSON.parse(text) };
}

/** Reads WEBHOOKS (no dispatcher runs here) until the job of `requestId` turns up; returns its raw text. */
async function nextWebhookJob(conn: NatsConnection, requestId: string): Promise<string> {
  const consumer = await jetstream(conn).consumers.get(WEBHOOKS_STREAM, WEBHOOKS_CONSUMER);
  for (;;) {
    const msg = await consumer.next({ expires: 10_000 });
    if (!msg) throw new Error(`no webhook job for ${requestId}`);
    msg.ack();
    const raw = msg.string();
    if ((JSON.parse(raw) as WebhookJob).requestId === requestId) return raw;
  }
}

beforeAll(async () => {
  [nats, runtime, keys] = await Promise.all([
    startNats(),
    startRuntime(),
    generateSigningKey().then((k) => ({ keys: [k] })),
  ]);
  nc = await connect({ servers: nats.url });
  await ensureWebhooksConsumer(await jetstreamManager(nc));
  token = await issueRunToken(keys, P, new Date(Date.now() + 3600_000));
  recorder = await listen((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'text/plain' }).end('custom-ok'));
  });
  resolver.apps.push(
    app('hello', { functions: ['echo', 'sleep', 'boom', 'ticks', 'forever'] }),
    // One slot: a call after a stream gets in only once the stream gave its slot back.
    app('single', {
      functions: ['echo', 'forever'],
      scaling: effectiveScaling({ replicaConcurrency: 1, maxReplicas: 1 }),
    }),
    app('nofns'),
    app('custom', { runtime: 'custom', upstream: recorder.url }),
    app('down', { upstream: `http://127.0.0.1:${await freePort()}` }),
    app('starting', { ready: false }),
  );
  const verifier = frontVerifier(createRunTokenVerifier(() => keys));
  const settings = { ...DEFAULT_GATEWAY_SETTINGS, syncTimeoutMs: SYNC_TIMEOUT_MS, maxBodyBytes: MAX_BODY };
  const balancerSettings = { ...DEFAULT_BALANCER_SETTINGS, coldStartTimeoutMs: 500, unreachableBlockMs: 20 };
  gateway = createGateway({
    resolver,
    verifyRunToken: verifier,
    nc,
    secretBox,
    log: silentLogger(),
    registry: new Registry(),
    settings,
    balancer: createBalancer(balancerSettings),
  });
  const l = await frontGateway(gateway, { resolver, verifier, settings, balancer: balancerSettings });
  server = l.server;
  base = l.url;
});

afterAll(async () => {
  if (server) await closeServer(server);
  if (recorder) await closeServer(recorder.server);
  await gateway?.close();
  await nc?.close();
  await runtime?.proc.stop(5_000);
  await nats?.stop();
});

describe('sync calls', () => {
  it('echoes through the runtime and gives every call its own X-Request-Id', async () => {
    const a = await call(`/v4/${P}/hello/echo`, { body: '{"x":1,"y":"two"}' });
    const b = await call(`/v4/${P}/hello/echo`, { body: '{"x":2}' });
    expect(a.status).toBe(200);
    expect(a.json()).toEqual({ echo: { x: 1, y: 'two' } });
    expect(b.json()).toEqual({ echo: { x: 2 } });
    const ida = a.headers['x-request-id'];
    const idb = b.headers['x-request-id'];
    expect(typeof ida).toBe('string');
    expect(ida).not.toBe(idb);
  });

  it('sends the app the request id and the caller headers, never credentials or our own parameters', async () => {
    seen.length = 0;
    const r = await call(
      `/v4/${P}/custom/some/path?q=1&async=false&webhookEndpoint=${encodeURIComponent('http://127.0.0.1:9/x')}`,
      {
        body: 'raw text is fine for a custom runtime',
        headers: { 'x-webhook-secret': 's3cret', 'x-custom': 'kept', 'content-type': 'text/plain' },
      },
    );
    expect(r.status).toBe(200);
    expect(r.text).toBe('custom-ok');
    const got = seen[0];
    expect(got?.url).toBe('/some/path?q=1');
    expect(got?.headers['x-request-id']).toBe(r.headers['x-request-id']);
    expect(got?.headers.authorization).toBeUndefined();
    expect(got?.headers['x-webhook-secret']).toBeUndefined();
    expect(got?.headers['x-custom']).toBe('kept');
  });

  it('passes a function error through with its status', async () => {
    const r = await call(`/v4/${P}/hello/boom`, { body: '{"message":"nope"}' });
    expect(r.status).toBe(500);
    expect(r.json().error.type).toBe('function_error');
    // The caller sees the platform's one error shape from the app too.
    expect(r.json().error.code).toBe('function_error');
    expect(r.headers['x-request-id']).toBeTruthy();
  });
});

describe('errors are JSON with the right status', () => {
  const expectError = (r: Awaited<ReturnType<typeof call>>, status: number, code: string) => {
    expect(r.status).toBe(status);
    expect(String(r.headers['content-type'])).toMatch(/^application\/json/);
    expect(r.json().error.code).toBe(code);
    expect(typeof r.json().error.message).toBe('string');
    expect(r.headers['x-request-id']).toBeTruthy();
  };

  it('401 without a token, with a garbage token and with an expired token', async () => {
    expectError(await call(`/v4/${P}/hello/echo`, { token: null }), 401, 'unauthenticated');
    expectError(await call(`/v4/${P}/hello/echo`, { token: 'not.a.jwt' }), 401, 'unauthenticated');
    const expired = await issueRunToken(
      keys,
      P,
      new Date(Date.now() - 3600_000),
      new Date(Date.now() - 7200_000),
    );
    expectError(await call(`/v4/${P}/hello/echo`, { token: expired }), 401, 'unauthenticated');
    const otherKeys = { keys: [await generateSigningKey()] };
    const forged = await issueRunToken(otherKeys, P, new Date(Date.now() + 3600_000));
    expectError(await call(`/v4/${P}/hello/echo`, { token: forged }), 401, 'unauthenticated');
  });

  it("another project's token gets exactly the unknown-app answer", async () => {
    const other = await issueRunToken(keys, 'proj-b', new Date(Date.now() + 3600_000));
    const foreign = await call(`/v4/${P}/hello/echo`, { token: other });
    expectError(foreign, 404, 'not_found');
    const projB = await issueRunToken(keys, 'proj-b', new Date(Date.now() + 3600_000));
    // proj-b has no app "hello": same body shape and message pattern as for proj-a's token above.
    const unknown = await call(`/v4/proj-b/hello/echo`, { token: projB });
    expectError(unknown, 404, 'not_found');
    expect(foreign.json().error.message.replace(P, 'X')).toBe(
      unknown.json().error.message.replace('proj-b', 'X'),
    );
  });

  it('404 for an unknown app, an unknown function and a path outside /v4', async () => {
    expectError(await call(`/v4/${P}/nope/echo`), 404, 'not_found');
    expectError(await call(`/v4/${P}/hello/missing`), 404, 'not_found');
    expectError(await call('/elsewhere'), 404, 'not_found');
  });

  it("checks a Cortex function's name decoded: an encoded known name is called, an encoded unknown one is a 404", async () => {
    const known = await call(`/v4/${P}/hello/ech%6F`, { body: '{"x":1}' });
    expect(known.text).not.toMatch(/has no function/);
    expect(known.status).toBe(200);
    const unknown = await call(`/v4/${P}/hello/mis%73ing`);
    expectError(unknown, 404, 'not_found');
    expect(unknown.json().error.message).toMatch(/has no function "mis%73ing"/);
  });

  it('405 for a GET', async () => {
    expectError(await call(`/v4/${P}/hello/echo`, { method: 'GET' }), 405, 'method_not_allowed');
  });

  it('400 for a body that is not a JSON object (cortex) and for a bad webhookEndpoint', async () => {
    expectError(await call(`/v4/${P}/hello/echo`, { body: '{not json' }), 400, 'invalid_body');
    expectError(await call(`/v4/${P}/hello/echo`, { body: '[1,2]' }), 400, 'invalid_body');
    expectError(
      await call(`/v4/${P}/hello/echo?webhookEndpoint=ftp%3A%2F%2Fexample.com`),
      400,
      'invalid_webhook_endpoint',
    );
  });

  it('413 above the body limit', async () => {
    const big = JSON.stringify({ pad: 'x'.repeat(MAX_BODY) });
    expectError(await call(`/v4/${P}/hello/echo`, { body: big }), 413, 'payload_too_large');
  });

  it('an app with no ready replica holds the call, then 503 cold_start_timeout with Retry-After', async () => {
    const r = await call(`/v4/${P}/starting/echo`);
    expectError(r, 503, 'cold_start_timeout');
    expect(r.json().error.message).toBe(
      'app "proj-a/starting" had no ready replica within 0.5 s; retry later',
    );
    expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('502 when the app refuses the connection, after bounded retries', async () => {
    const r = await call(`/v4/${P}/down/echo`);
    expectError(r, 502, 'upstream_unreachable');
    expect(r.json().error).toMatchObject({ reason: 'unreachable', detail: 'ECONNREFUSED' });
  });

  it('504 when the app does not answer within the sync timeout', async () => {
    expectError(await call(`/v4/${P}/hello/sleep`, { body: '{"seconds": 20}' }), 504, 'upstream_timeout');
  });
});

describe('a response body that stalls', () => {
  it("is a 504 JSON error without the app's headers, and its webhook gets the timeout", async () => {
    const stall = await listen((req, res) => {
      req.resume();
      // The head promises 10 bytes, then nothing comes.
      res.writeHead(200, { 'content-length': '10', 'content-encoding': 'gzip', 'x-upstream': 'yes' });
      res.flushHeaders();
    });
    const r = staticResolver([app('stall', { runtime: 'custom', upstream: stall.url })]);
    const g = createGateway({
      resolver: r,
      verifyRunToken: createRunTokenVerifier(() => keys),
      nc,
      secretBox,
      log: silentLogger(),
      registry: new Registry(),
      settings: { ...DEFAULT_GATEWAY_SETTINGS, streamIdleTimeoutMs: 1_000 },
    });
    const l = await frontGateway(g);
    try {
      const res = await request(`${l.url}/v4/${P}/stall/run`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: '{}',
      });
      const text = await res.body.text();
      expect(res.statusCode).toBe(504);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.headers['content-encoding']).toBeUndefined();
      expect(res.headers['x-upstream']).toBeUndefined();
      expect(res.headers['x-request-id']).toBeTruthy();
      expect(JSON.parse(text).error.code).toBe('upstream_timeout');

      // With a webhook, the receiver learns of the timeout as the caller does.
      const hooked = await request(
        `${l.url}/v4/${P}/stall/run?webhookEndpoint=${encodeURIComponent('http://hooks.example.test/x')}`,
        {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: '{}',
        },
      );
      await hooked.body.dump();
      expect(hooked.statusCode).toBe(504);
      const job = JSON.parse(await nextWebhookJob(nc, String(hooked.headers['x-request-id']))) as WebhookJob;
      expect(job.runStatus).toBe('timeout');
      expect(job.response.status).toBe(504);
    } finally {
      await closeServer(stall.server);
      await closeServer(l.server);
      await g.close();
    }
  });
});

describe('streaming', () => {
  /** A streamed call (Accept: text/event-stream) with a JSON body, as a browser's fetch makes it. */
  const stream = (path: string, body: unknown, signal?: AbortSignal) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'text/event-stream',
        'content-type': 'application/json',
      },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });

  it('passes each event through as the generator yields it, with the spec headers', async () => {
    const gate = join(dir, 'gate-');
    const res = await stream(`/v4/${P}/hello/ticks`, { count: 3, gate });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('transfer-encoding')).toBe('chunked');
    expect(res.headers.get('x-request-id')).toBeTruthy();
    const reader = res.body?.getReader();
    if (!reader) throw new Error('no body');
    const decoder = new TextDecoder();
    let buffer = '';
    const nextEvent = async (): Promise<string> => {
      for (;;) {
        const end = buffer.indexOf('\n\n');
        if (end >= 0) {
          const ev = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          return ev;
        }
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended; buffered: ${buffer}`);
        buffer += decoder.decode(value, { stream: true });
      }
    };
    // Event i+1 can only be produced after we open gate i+1: receiving event i first proves it was not buffered.
    for (let i = 0; i < 3; i++) {
      const ev = await nextEvent();
      expect(ev.startsWith('data: ')).toBe(true);
      expect(ev).toMatch(new RegExp(`"i":\\s*${i}`));
      if (i < 2) writeFileSync(`${gate}${i + 1}`, '');
    }
    const rest = await reader.read();
    expect(rest.done || decoder.decode(rest.value) === '').toBe(true);
  });

  it('closes the generator in the runtime when the client hangs up', async () => {
    const marker = join(dir, 'forever-closed');
    const ac = new AbortController();
    const res = await stream(`/v4/${P}/hello/forever`, { marker }, ac.signal);
    const reader = res.body?.getReader();
    await reader?.read();
    await reader?.read();
    expect(existsSync(marker)).toBe(false);
    ac.abort();
    await waitFor('generator closed', async () => existsSync(marker), 20_000);
    expect(readFileSync(marker, 'utf8')).toContain('closed');
  });

  it('gives the replica slot back when the caller goes away mid-stream, and the next call gets it', async () => {
    const marker = join(dir, 'single-closed');
    const ac = new AbortController();
    const res = await stream(`/v4/${P}/single/forever`, { marker }, ac.signal);
    const reader = res.body?.getReader();
    expect((await reader?.read())?.done).toBe(false);
    // The stream holds the app's only slot: this call waits in the queue until it is given back.
    const next = call(`/v4/${P}/single/echo`, { body: '{"after":"stream"}' });
    ac.abort();
    const r = await next; // with the slot never freed: 503 queue_timeout after 30 s
    expect(r.status).toBe(200);
    expect(r.json()).toEqual({ echo: { after: 'stream' } });
    await waitFor('generator closed', async () => existsSync(marker), 20_000);
  });
});

describe('custom domains', () => {
  it('routes an assigned host to its app and 404s it after unassignment', async () => {
    resolver.hosts['api.example.test'] = { projectId: P, appName: 'hello' };
    const r = await call('/echo', { body: '{"via":"domain"}', headers: { host: 'api.example.test' } });
    expect(r.status).toBe(200);
    expect(r.json()).toEqual({ echo: { via: 'domain' } });
    delete resolver.hosts['api.example.test'];
    const after = await call('/echo', { body: '{}', headers: { host: 'api.example.test' } });
    expect(after.status).toBe(404);
    expect(after.json().error.code).toBe('not_found');
  });
});

describe('webhookEndpoint on a sync call', () => {
  it('answers the caller unchanged and enqueues a webhook job with the secret sealed', async () => {
    const endpoint = 'http://hooks.example.test/receive?x=1';
    const r = await call(`/v4/${P}/hello/echo?webhookEndpoint=${encodeURIComponent(endpoint)}`, {
      body: '{"w":1}',
      headers: { 'x-webhook-secret': 'very-secret-value' },
    });
    expect(r.status).toBe(200);
    expect(r.json()).toEqual({ echo: { w: 1 } });
    const raw = await nextWebhookJob(nc, String(r.headers['x-request-id']));
    expect(raw).not.toContain('very-secret-value');
    const job = JSON.parse(raw) as WebhookJob;
    expect(job.requestId).toBe(r.headers['x-request-id']);
    expect(job.target.endpoint).toBe(endpoint);
    expect(secretBox.open(job.target.sealedSecret ?? '')).toBe('very-secret-value');
    expect(job.runStatus).toBe('success');
    expect(job.response.status).toBe(200);
    expect(JSON.parse(Buffer.from(job.response.bodyBase64, 'base64').toString())).toEqual({ echo: { w: 1 } });
  });
});

describe('webhookEndpoint with Accept-Encoding', () => {
  it('asks the app for an uncompressed body, so the webhook gets plain JSON', async () => {
    const gzipping = await listen((req, res) => {
      req.resume();
      req.on('end', () => {
        const body = Buffer.from('{"plain":true}');
        if (String(req.headers['accept-encoding'] ?? '').includes('gzip'))
          res
            .writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' })
            .end(gzipSync(body));
        else res.writeHead(200, { 'content-type': 'application/json' }).end(body);
      });
    });
    resolver.apps.push(app('gzipping', { runtime: 'custom', upstream: gzipping.url }));
    try {
      const endpoint = 'http://hooks.example.test/gzip';
      const r = await call(`/v4/${P}/gzipping/run?webhookEndpoint=${encodeURIComponent(endpoint)}`, {
        headers: { 'accept-encoding': 'gzip' },
      });
      expect(r.status).toBe(200);
      const job = JSON.parse(await nextWebhookJob(nc, String(r.headers['x-request-id']))) as WebhookJob;
      expect(Buffer.from(job.response.bodyBase64, 'base64').toString()).toBe('{"plain":true}');
    } finally {
      await closeServer(gzipping.server);
    }
  });
});

describe('draining (SIGTERM)', () => {
  it('refuses new calls with 503 and lets an in-flight call finish before drain() resolves', async () => {
    const g = createGateway({
      resolver,
      verifyRunToken: createRunTokenVerifier(() => keys),
      nc,
      secretBox,
      log: silentLogger(),
      registry: new Registry(),
      settings: { ...DEFAULT_GATEWAY_SETTINGS, drainTimeoutMs: 30_000 },
    });
    const l = await frontGateway(g);
    try {
      const marker = join(dir, 'drain-slept');
      const inflight = request(`${l.url}/v4/${P}/hello/sleep`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ seconds: 2, marker }),
      });
      await waitFor('call in flight', async () => g.inflight() === 1, 10_000);
      let drained = false;
      const draining = g.drain().then(() => {
        drained = true;
      });
      const refused = await request(`${l.url}/v4/${P}/hello/echo`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: '{}',
      });
      expect(refused.statusCode).toBe(503);
      expect(((await refused.body.json()) as { error: { code: string } }).error.code).toBe('shutting_down');
      expect(drained).toBe(false);
      const res = await inflight;
      expect(res.statusCode).toBe(200);
      expect(await res.body.json()).toEqual({ slept: 2 });
      await draining;
      expect(existsSync(marker)).toBe(true);
    } finally {
      await closeServer(l.server);
      await g.close();
    }
  });
});

describe('logs', () => {
  it('carry the request id and never the token or the webhook secret', async () => {
    let out = '';
    const sink = new Writable({
      write(chunk, _enc, cb) {
        out += chunk.toString();
        cb();
      },
    });
    const g = createGateway({
      resolver,
      verifyRunToken: createRunTokenVerifier(() => keys),
      nc,
      secretBox,
      log: createLogger({ name: 'gw-log-test', level: 'trace', destination: sink }),
      registry: new Registry(),
      settings: DEFAULT_GATEWAY_SETTINGS,
    });
    const l = await frontGateway(g);
    try {
      const hook = encodeURIComponent('http://hooks.example.test/x');
      const ids: string[] = [];
      for (const path of [
        `/v4/${P}/hello/echo?webhookEndpoint=${hook}`,
        `/v4/${P}/down/echo?webhookEndpoint=${hook}`,
      ]) {
        const res = await request(`${l.url}${path}`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            'x-webhook-secret': 'log-test-secret-value',
          },
          body: '{}',
        });
        await res.body.dump();
        ids.push(String(res.headers['x-request-id']));
      }
      await waitFor('log lines', async () => ids.every((id) => out.includes(id)), 10_000);
      expect(out).not.toContain('log-test-secret-value');
      expect(out).not.toContain(token);
      const lines = out
        .trim()
        .split('\n')
        .map((x) => JSON.parse(x) as { requestId?: string; msg?: string });
      expect(lines.filter((x) => x.msg === 'request').every((x) => typeof x.requestId === 'string')).toBe(
        true,
      );
    } finally {
      await closeServer(l.server);
      await g.close();
    }
  });
});
