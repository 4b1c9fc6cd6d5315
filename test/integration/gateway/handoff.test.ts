/**
 * Node's side of the native data plane's hand-off (docs/design/native-data-plane.md §3): calls sent on
 * the hand-off socket with an `X-Apphost-Handoff` marker are served by the gateway with the marker's
 * request id, start and queue deadline; the marker never reaches an app, and is honoured only on the
 * socket. Real runtime, real NATS JetStream, real HTTP over a real unix socket.
 */
import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBalancer, DEFAULT_BALANCER_SETTINGS } from '../../../src/gateway/balancer/balancer.ts';
import {
  formatHandoffMarker,
  type HandoffMarker,
  type HandoffServer,
  serveHandoff,
} from '../../../src/gateway/dataplane/handoff.ts';
import { createGateway, type Gateway } from '../../../src/gateway/gateway.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../../../src/gateway/settings.ts';
import { ensureSyncCallsStream } from '../../../src/runs/infrastructure.ts';
import { createRunStore, ensureRunsInfrastructure, type RunStore } from '../../../src/runs/store.ts';
import { createSyncCallReader, type SyncCallReader } from '../../../src/runs/sync-call-reader.ts';
import type { RunRecord } from '../../../src/shared/contracts/messaging.ts';
import type { ResolvedApp } from '../../../src/shared/contracts/seams.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { createRunTokenVerifier, generateSigningKey, issueRunToken } from '../../../src/shared/run-tokens.ts';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { waitFor } from '../../harness/process.ts';
import {
  closeServer,
  listen,
  type Runtime,
  replicaResolver,
  resolvedApp,
  startRuntime,
  tempDir,
} from './helpers.ts';

const P = 'proj-h';
/** Bound on a fire-and-forget record reaching the stream (a busy machine). */
const RECORD_TIMEOUT_MS = 20_000;
/** How late after its deadline a handed-off queued call may be answered (timer and event-loop slack). */
const DEADLINE_SLACK_MS = 250;

let nats: NatsServer;
let nc: NatsConnection;
let runtime: Runtime;
let gateway: Gateway;
let handoff: HandoffServer;
let tcp: { server: Server; url: string };
let receiver: { server: Server; url: string };
let socketPath: string;
let token: string;
let reader: SyncCallReader;
let runs: RunStore;
const registry = new Registry();
let logged = '';
/** The headers each call to the `headers` app arrived with. */
const received: IncomingHttpHeaders[] = [];
const apps: ResolvedApp[] = [];
const resolver = replicaResolver(apps);

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  ms: number;
}

/** A POST over the hand-off socket, as the data plane sends one. */
function viaSocket(path: string, headers: Record<string, string>, body = '{}'): Promise<Answer> {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        socketPath,
        path,
        method: 'POST',
        headers: {
          host: 'gateway.example.test',
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          ...headers,
        },
        signal: AbortSignal.timeout(15_000),
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, ms: Date.now() - t0 }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const marker = (over: Partial<HandoffMarker> = {}): HandoffMarker => ({
  requestId: randomUUID(),
  startedAt: Date.now(),
  reason: 'token_miss',
  ...over,
});

const accessLines = () =>
  logged
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { msg?: string; requestId?: string; durationMs?: number; problem?: string });

async function recorded(app: string, requestId: string): Promise<RunRecord> {
  let found: RunRecord | undefined;
  await waitFor(
    `sync record ${requestId}`,
    async () => {
      found = await reader.get(P, app, requestId);
      return found !== undefined;
    },
    RECORD_TIMEOUT_MS,
  );
  return found as RunRecord;
}

async function handoffs(reason: string): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find(
    (x) => x.name === 'apphost_gateway_dataplane_handoffs_total',
  );
  return (m?.values.find((v) => v.labels.reason === reason)?.value as number | undefined) ?? 0;
}

beforeAll(async () => {
  let keys: Awaited<ReturnType<typeof generateSigningKey>>;
  [nats, runtime, keys] = await Promise.all([startNats(), startRuntime(), generateSigningKey()]);
  nc = await connect({ servers: nats.url });
  const jsm = await jetstreamManager(nc);
  runs = createRunStore(await ensureRunsInfrastructure(jsm), nc);
  await ensureSyncCallsStream(jsm);
  reader = createSyncCallReader(nc, { timeoutMs: 10_000 });
  token = await issueRunToken({ keys: [keys] }, P, new Date(Date.now() + 3600_000));
  // A real HTTP receiver standing in for a custom app: it answers with nothing but remembers the headers.
  receiver = await listen((req, res) => {
    received.push(req.headers);
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
  });
  apps.push(
    resolvedApp(P, 'hello', runtime.url, { functions: ['echo'] }),
    resolvedApp(P, 'headers', receiver.url, { runtime: 'custom' }),
    // No replica ever: a call waits for a cold start (60 s by default) unless its deadline is sooner.
    resolvedApp(P, 'cold', 'http://127.0.0.1:9', { ready: false }),
  );
  resolver.set('hello', [runtime.url]);
  resolver.set('headers', [receiver.url]);
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logged += chunk.toString();
      cb();
    },
  });
  const log = createLogger({ name: 'gw-handoff-test', level: 'info', destination: sink });
  gateway = createGateway({
    resolver,
    verifyRunToken: createRunTokenVerifier(() => ({ keys: [keys] })),
    nc,
    secretBox: createSecretBox('test-platform-key-0123456789'),
    log,
    registry,
    settings: { ...DEFAULT_GATEWAY_SETTINGS, syncRecordsPerAppPerSecond: 1_000, syncRecordsPerSecond: 1_000 },
    balancer: createBalancer(DEFAULT_BALANCER_SETTINGS),
    runStore: runs,
  });
  socketPath = join(tempDir('apphost-handoff-'), 'handoff.sock');
  handoff = await serveHandoff({ path: socketPath, callback: gateway.callback(), log, registry });
  tcp = await listen(gateway.callback());
});

afterAll(async () => {
  await handoff?.close();
  if (tcp) await closeServer(tcp.server);
  if (receiver) await closeServer(receiver.server);
  await gateway?.close();
  await nc?.close();
  await runtime?.proc.stop(5_000);
  await nats?.stop();
});

describe('the hand-off socket', () => {
  it('is a socket only its user may use (mode 0600)', () => {
    const st = statSync(socketPath);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
  });

  it('serves a sync call with the marker’s request id on the answer, in the access line and in the record, timed from the marker’s start', async () => {
    const before = await handoffs('token_miss');
    // The data plane took the call 3 s ago (say, behind a slow token verification).
    const m = marker({ startedAt: Date.now() - 3_000 });
    const res = await viaSocket(
      `/v4/${P}/hello/echo`,
      { 'x-apphost-handoff': formatHandoffMarker(m) },
      '{"a":1}',
    );
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ echo: { a: 1 } });
    expect(res.headers['x-request-id']).toBe(m.requestId);

    await waitFor('access line', async () => accessLines().some((l) => l.requestId === m.requestId), 10_000);
    const line = accessLines().find((l) => l.msg === 'request' && l.requestId === m.requestId);
    expect(line?.durationMs).toBeGreaterThanOrEqual(3_000);

    const rec = await recorded('hello', m.requestId);
    expect(rec).toMatchObject({ mode: 'sync', runId: m.requestId, state: 'success', responseStatus: 200 });
    expect(rec.createdAt).toBe(new Date(m.startedAt).toISOString());
    expect(await handoffs('token_miss')).toBe(before + 1);
  });

  it('keeps a handed-off call’s queue deadline: one that expires while queued, and one already past, are answered by it', async () => {
    const deadlineMs = 600;
    const m = marker({ reason: 'no_replica', deadline: Date.now() + deadlineMs });
    const res = await viaSocket(`/v4/${P}/cold/echo`, { 'x-apphost-handoff': formatHandoffMarker(m) });
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body).error.code).toBe('cold_start_timeout');
    expect(res.headers['x-request-id']).toBe(m.requestId);
    expect(Date.now()).toBeLessThanOrEqual((m.deadline ?? 0) + DEADLINE_SLACK_MS);

    const past = marker({
      reason: 'no_replica',
      startedAt: Date.now() - 2_000,
      deadline: Date.now() - 1_000,
    });
    const late = await viaSocket(`/v4/${P}/cold/echo`, { 'x-apphost-handoff': formatHandoffMarker(past) });
    expect(late.status).toBe(503);
    expect(JSON.parse(late.body).error.code).toBe('cold_start_timeout');
    expect(late.ms).toBeLessThanOrEqual(DEADLINE_SLACK_MS);
  });

  it('answers a call with a malformed or missing marker 400 with a JSON error, logs it, and serves nothing', async () => {
    const bad = [
      'v=2; id=00000000-0000-4000-8000-000000000000; start=1; reason=async',
      `v=1; id=not-a-uuid; start=${Date.now()}; reason=async`,
      `v=1; id=${randomUUID()}; start=${Date.now()}; reason=because`,
      `v=1; start=${Date.now()}; id=${randomUUID()}; reason=async`,
    ];
    const calls = received.length;
    for (const value of bad) {
      const res = await viaSocket(`/v4/${P}/headers/x`, { 'x-apphost-handoff': value });
      expect(res.status).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      const body = JSON.parse(res.body) as { error: { code: string; message: string; problem: string } };
      expect(body.error.code).toBe('bad_request');
      expect(body.error.message).toContain('x-apphost-handoff');
      expect(body.error.problem).toBeTruthy();
    }
    const missing = await viaSocket(`/v4/${P}/headers/x`, {});
    expect(missing.status).toBe(400);
    expect(JSON.parse(missing.body).error.problem).toBe('missing');
    expect(received.length).toBe(calls);
    await waitFor(
      'refusals logged',
      async () => accessLines().filter((l) => l.msg?.startsWith('hand-off refused')).length >= bad.length + 1,
      10_000,
    );
  });

  it('never lets an app see the marker: not after a hand-off, and not from a caller on the TCP port, where it is not honoured', async () => {
    const m = marker({ reason: 'webhook' });
    const res = await viaSocket(`/v4/${P}/headers/x`, { 'x-apphost-handoff': formatHandoffMarker(m) });
    expect(res.status).toBe(200);
    expect(res.headers['x-request-id']).toBe(m.requestId);
    const viaHandoff = received.at(-1);
    expect(viaHandoff?.['x-request-id']).toBe(m.requestId);
    expect(viaHandoff).not.toHaveProperty('x-apphost-handoff');

    const forged = marker();
    const direct = await fetch(`${tcp.url}/v4/${P}/headers/x`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        'x-apphost-handoff': formatHandoffMarker(forged),
      },
      body: '{}',
    });
    expect(direct.status).toBe(200);
    expect(direct.headers.get('x-request-id')).not.toBe(forged.requestId);
    const viaTcp = received.at(-1);
    expect(viaTcp?.['x-request-id']).toBe(direct.headers.get('x-request-id'));
    expect(viaTcp).not.toHaveProperty('x-apphost-handoff');
  });

  it('answers a handed-off async call 202 under the marker’s id, with the run durable', async () => {
    const m = marker({ reason: 'async' });
    const res = await viaSocket(`/v4/${P}/hello/echo?async=true`, {
      'x-apphost-handoff': formatHandoffMarker(m),
    });
    expect(res.status).toBe(202);
    expect(JSON.parse(res.body)).toEqual({ run_id: m.requestId });
    expect(res.headers['x-request-id']).toBe(m.requestId);
    // Durable before the 202: the record is there as soon as the answer is.
    const run = await runs.get(P, 'hello', m.requestId);
    expect(run?.runId).toBe(m.requestId);
    expect(await handoffs('async')).toBeGreaterThanOrEqual(1);
  });
});
