/**
 * Async runs end to end: gateway accept (202) → RUNS → run worker → the real Python runtime → run
 * record (and webhook job), on a private NATS server so the RUNS consumer is ours alone.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGateway, type Gateway } from '../../../src/gateway/gateway.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../../../src/gateway/settings.ts';
import { RUN_RESULT_INLINE_MAX_BYTES } from '../../../src/runs/outcome.ts';
import { DEFAULT_RUN_WORKER_SETTINGS } from '../../../src/runs/settings.ts';
import { createRunStore, ensureRunsInfrastructure, type RunStore } from '../../../src/runs/store.ts';
import { createRunWorker, type RunWorker } from '../../../src/runs/worker.ts';
import {
  RUNS_BUCKET,
  RUNS_STREAM,
  type RunRecord,
  runResultKey,
  TERMINAL_RUN_STATES,
  WEBHOOKS_STREAM,
  type WebhookJob,
} from '../../../src/shared/contracts/messaging.ts';
import type { ResolvedApp } from '../../../src/shared/contracts/seams.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import {
  createRunTokenVerifier,
  generateSigningKey,
  issueRunToken,
  type KeySet,
} from '../../../src/shared/run-tokens.ts';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { ensureWebhooksConsumer, WEBHOOKS_CONSUMER } from '../../../src/webhooks/stream.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { waitFor } from '../../harness/process.ts';
import {
  closeServer,
  listen,
  type Runtime,
  resolvedApp,
  startRuntime,
  staticResolver,
  tempDir,
} from '../gateway/helpers.ts';

const P = 'proj-runs';
/** Short so the "longer than ack_wait" run is quick; heartbeats every ACK_WAIT_MS / 3. */
const ACK_WAIT_MS = 1_500;
const RUN_WAIT_MS = 30_000;

let nats: NatsServer;
let nc: NatsConnection;
let runtime: Runtime;
let keys: KeySet;
let token: string;
let gateway: Gateway;
let worker: RunWorker;
let store: RunStore;
let server: Server;
let base: string;
const resolver = staticResolver([]);
const dir = tempDir('apphost-runs-');
const secretBox = createSecretBox('test-platform-key-0123456789');
const gatewayRegistry = new Registry();
const workerRegistry = new Registry();

const app = (name: string, over: Partial<ResolvedApp> = {}) => resolvedApp(P, name, runtime.url, over);

async function runAsync(appName: string, fn: string, body: unknown, query = '') {
  const res = await request(`${base}/v4/${P}/${appName}/${fn}?async=true${query}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text };
}

async function waitForState(
  appName: string,
  runId: string,
  states: readonly RunRecord['state'][] = TERMINAL_RUN_STATES,
): Promise<RunRecord> {
  let rec: RunRecord | undefined;
  await waitFor(
    `run ${runId} in ${states.join('|')}`,
    async () => {
      rec = await store.get(P, appName, runId);
      return !!rec && states.includes(rec.state);
    },
    RUN_WAIT_MS,
  );
  return rec as RunRecord;
}

beforeAll(async () => {
  [nats, runtime, keys] = await Promise.all([
    startNats(),
    startRuntime(),
    generateSigningKey().then((k) => ({ keys: [k] })),
  ]);
  nc = await connect({ servers: nats.url });
  const jsm = await jetstreamManager(nc);
  await ensureWebhooksConsumer(jsm);
  store = createRunStore(await ensureRunsInfrastructure(jsm), nc);
  token = await issueRunToken(keys, P, new Date(Date.now() + 3600_000));
  resolver.apps.push(
    app('hello', { functions: ['echo', 'sleep', 'started_then_sleep', 'boom', 'gated', 'big'] }),
    app('brief', { gracePeriodSeconds: 1 }),
  );
  gateway = createGateway({
    resolver,
    verifyRunToken: createRunTokenVerifier(() => keys),
    nc,
    secretBox,
    log: silentLogger(),
    registry: gatewayRegistry,
    settings: { ...DEFAULT_GATEWAY_SETTINGS, publishTimeoutMs: 2_000 },
  });
  worker = createRunWorker({
    nc,
    resolver,
    // As in a gateway process: runs take replica slots through the gateway's balancer.
    callApp: gateway.callApp,
    log: silentLogger(),
    registry: workerRegistry,
    settings: {
      ...DEFAULT_RUN_WORKER_SETTINGS,
      ackWaitMs: ACK_WAIT_MS,
      concurrency: 4,
      pullExpiresMs: 1_000,
    },
  });
  await worker.start();
  const l = await listen(gateway.callback());
  server = l.server;
  base = l.url;
});

afterAll(async () => {
  if (server) await closeServer(server);
  await worker?.stop(5_000);
  await gateway?.close();
  await nc?.close().catch(() => undefined);
  await runtime?.proc.stop(5_000);
  await nats?.stop();
});

describe('async runs', () => {
  it('answers 202 {run_id} while the function is still running, then the run reaches success', async () => {
    const gate = join(dir, 'gate-202');
    const marker = join(dir, 'started-202');
    // The function cannot return before we create `gate`, which we do only after holding the 202.
    const r = await runAsync('hello', 'gated', { gate, marker });
    expect(r.status).toBe(202);
    expect(String(r.headers['content-type'])).toMatch(/^application\/json/);
    const runId = String(r.headers['x-request-id']);
    expect(JSON.parse(r.text)).toStrictEqual({ run_id: runId });
    expect(Object.keys(JSON.parse(r.text))).toEqual(['run_id']);
    await waitFor('the function started', async () => existsSync(marker), RUN_WAIT_MS);
    expect((await store.get(P, 'hello', runId))?.state).toBe('running');
    writeFileSync(gate, '');
    const rec = await waitForState('hello', runId);
    expect(rec.state).toBe('success');
    expect(rec.responseStatus).toBe(200);
    expect(rec.executions).toBe(1);
  });

  it('a raising function ends in failure', async () => {
    const r = await runAsync('hello', 'boom', { message: 'kaput' });
    expect(r.status).toBe(202);
    const rec = await waitForState('hello', String(r.headers['x-request-id']), [
      'success',
      'failure',
      'timeout',
    ]);
    expect(rec.state).toBe('failure');
    expect(rec.responseStatus).toBe(500);
  });

  it('a function longer than its grace period ends in timeout', async () => {
    const r = await runAsync('brief', 'sleep', { seconds: 8 });
    expect(r.status).toBe(202);
    const rec = await waitForState('brief', String(r.headers['x-request-id']), [
      'success',
      'failure',
      'timeout',
    ]);
    expect(rec.state).toBe('timeout');
    expect(rec.error?.code).toBe('timeout');
  });

  it('a run longer than ack_wait is executed exactly once (heartbeats keep it)', async () => {
    const marker = join(dir, 'long-starts');
    const r = await runAsync('hello', 'started_then_sleep', { marker, seconds: (ACK_WAIT_MS * 3) / 1000 });
    expect(r.status).toBe(202);
    const rec = await waitForState('hello', String(r.headers['x-request-id']), [
      'success',
      'failure',
      'timeout',
    ]);
    expect(rec.state).toBe('success');
    expect(rec.executions).toBe(1);
    expect(readFileSync(marker, 'utf8').trim().split('\n')).toEqual(['start']);
  });

  it('an async call to an unknown app or function is refused at once with 404, nothing queued', async () => {
    const before = (await (await jetstreamManager(nc)).streams.info(RUNS_STREAM)).state.last_seq;
    const a = await runAsync('nope', 'echo', {});
    const b = await runAsync('hello', 'missing', {});
    expect(a.status).toBe(404);
    expect(b.status).toBe(404);
    const after = (await (await jetstreamManager(nc)).streams.info(RUNS_STREAM)).state.last_seq;
    expect(after).toBe(before);
  });

  it('an async body too large for a queue message is refused with 413, not 503', async () => {
    const r = await runAsync('hello', 'echo', { pad: 'x'.repeat(1_200_000) });
    expect(r.status).toBe(413);
    expect(JSON.parse(r.text).error.code).toBe('payload_too_large');
  });

  it('cancelling a running run aborts it and ends it cancelled', async () => {
    const r = await runAsync('hello', 'sleep', { seconds: 20 });
    const runId = String(r.headers['x-request-id']);
    await waitForState('hello', runId, ['running']);
    const after = await store.requestCancel(P, 'hello', runId);
    expect(after?.cancelRequested).toBe(true);
    const rec = await waitForState('hello', runId, ['cancelled', 'success', 'failure', 'timeout']);
    expect(rec.state).toBe('cancelled');
    expect(rec.executions).toBe(1);
  });

  it('lists runs newest first and filters by state', async () => {
    const all = await store.list(P, 'hello');
    expect(all.length).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < all.length; i++)
      expect((all[i - 1]?.createdAt ?? '') >= (all[i]?.createdAt ?? '')).toBe(true);
    const failed = await store.list(P, 'hello', { state: 'failure' });
    expect(failed.every((x) => x.state === 'failure')).toBe(true);
    expect(failed.length).toBeGreaterThanOrEqual(1);
  });

  it('publishes the webhook job of an async run with its result', async () => {
    const endpoint = 'http://hooks.example.test/async';
    const r = await runAsync('hello', 'echo', { a: 1 }, `&webhookEndpoint=${encodeURIComponent(endpoint)}`);
    const runId = String(r.headers['x-request-id']);
    const rec = await waitForState('hello', runId);
    expect(rec.webhookHost).toBe('hooks.example.test');
    const consumer = await jetstream(nc).consumers.get(WEBHOOKS_STREAM, WEBHOOKS_CONSUMER);
    let job: WebhookJob | undefined;
    while (!job) {
      const msg = await consumer.next({ expires: 10_000 });
      if (!msg) throw new Error('no webhook job');
      msg.ack();
      const j = msg.json<WebhookJob>();
      if (j.requestId === runId) job = j;
    }
    expect(job.runStatus).toBe('success');
    expect(JSON.parse(Buffer.from(job.response.bodyBase64, 'base64').toString())).toEqual({ echo: { a: 1 } });
  });
});

describe('results', () => {
  it('a small result travels in the final record (no key of its own), a larger one under its own key', async () => {
    const kv = await new Kvm(nc).open(RUNS_BUCKET);
    const small = await runAsync('hello', 'big', { size: 100 });
    const large = await runAsync('hello', 'big', { size: RUN_RESULT_INLINE_MAX_BYTES + 1 });
    const smallId = String(small.headers['x-request-id']);
    const largeId = String(large.headers['x-request-id']);
    const [s, l] = [await waitForState('hello', smallId), await waitForState('hello', largeId)];
    expect(s).toMatchObject({ state: 'success', result: { kept: 'complete', keptBytes: 102 } });
    expect(Buffer.from(s.result?.inlineBase64 ?? '', 'base64').toString()).toBe(`"${'x'.repeat(100)}"`);
    expect(await kv.get(runResultKey(P, 'hello', smallId))).toBeNull();
    expect(l).toMatchObject({ state: 'success', result: { kept: 'complete' } });
    expect(l.result?.inlineBase64).toBeUndefined();
    expect((await kv.get(runResultKey(P, 'hello', largeId)))?.operation).toBe('PUT');
    // Readers see the same bytes wherever they are kept.
    expect(Buffer.from((await store.getResult(P, 'hello', smallId)) ?? []).toString()).toBe(
      `"${'x'.repeat(100)}"`,
    );
    expect(Buffer.from((await store.getResult(P, 'hello', largeId)) ?? []).toString()).toBe(
      `"${'x'.repeat(RUN_RESULT_INLINE_MAX_BYTES + 1)}"`,
    );
  });
});

describe('metrics', () => {
  it('count requests by app, mode and status, runs by state, and report the queue depth', async () => {
    const gw = await gatewayRegistry.metrics();
    expect(gw).toContain(
      `apphost_gateway_requests_total{project="${P}",app="hello",mode="async",status="202"}`,
    );
    expect(gw).toMatch(/apphost_runs_queue_depth \d+/);
    expect(gw).toContain('apphost_gateway_request_duration_seconds_bucket');
    expect(gw).toContain('apphost_gateway_inflight_requests');
    const w = await workerRegistry.metrics();
    expect(w).toMatch(/apphost_runs_finished_total\{state="success"\} [1-9]/);
    expect(w).toMatch(/apphost_runs_finished_total\{state="timeout"\} [1-9]/);
  });
});

describe('cancelling a queued run', () => {
  it('is never started and ends cancelled', async () => {
    await worker.stop(10_000);
    const marker = join(dir, 'never');
    const r = await runAsync('hello', 'started_then_sleep', { marker, seconds: 0.1 });
    expect(r.status).toBe(202);
    const runId = String(r.headers['x-request-id']);
    expect((await store.get(P, 'hello', runId))?.state).toBe('queued');
    expect((await store.requestCancel(P, 'hello', runId))?.state).toBe('cancelled');
    worker = createRunWorker({
      nc,
      resolver,
      log: silentLogger(),
      registry: new Registry(),
      settings: { ...DEFAULT_RUN_WORKER_SETTINGS, ackWaitMs: ACK_WAIT_MS, pullExpiresMs: 1_000 },
    });
    await worker.start();
    // The worker consumes (and acks) the message without running it: the stream drains.
    await waitFor(
      'RUNS drained',
      async () => (await (await jetstreamManager(nc)).streams.info(RUNS_STREAM)).state.messages === 0,
      RUN_WAIT_MS,
    );
    expect(existsSync(marker)).toBe(false);
    expect((await store.get(P, 'hello', runId))?.state).toBe('cancelled');
  });
});

describe('redelivery cap', () => {
  it('a run delivered more often than maxExecutions is marked failure', async () => {
    await worker.stop(10_000);
    const capped = {
      ...DEFAULT_RUN_WORKER_SETTINGS,
      ackWaitMs: ACK_WAIT_MS,
      pullExpiresMs: 1_000,
      maxExecutions: 1,
    };
    const first = createRunWorker({
      nc,
      resolver,
      log: silentLogger(),
      registry: new Registry(),
      settings: capped,
    });
    await first.start();
    const r = await runAsync('hello', 'sleep', { seconds: 20 });
    const runId = String(r.headers['x-request-id']);
    await waitForState('hello', runId, ['running']);
    // Stopping with no grace hands the running run back to JetStream: its second delivery is over the cap.
    await first.stop(0);
    worker = createRunWorker({
      nc,
      resolver,
      log: silentLogger(),
      registry: new Registry(),
      settings: capped,
    });
    await worker.start();
    const rec = await waitForState('hello', runId, ['success', 'failure', 'timeout', 'cancelled']);
    expect(rec.state).toBe('failure');
    expect(rec.error?.code).toBe('redelivery_exhausted');
    expect(rec.executions).toBe(1);
  });
});

describe('webhook body limit', () => {
  it('a response over maxWebhookBodyBytes is not forwarded (never truncated)', async () => {
    await worker.stop(10_000);
    worker = createRunWorker({
      nc,
      resolver,
      log: silentLogger(),
      registry: new Registry(),
      settings: {
        ...DEFAULT_RUN_WORKER_SETTINGS,
        ackWaitMs: ACK_WAIT_MS,
        pullExpiresMs: 1_000,
        maxWebhookBodyBytes: 64,
      },
    });
    await worker.start();
    const endpoint = 'http://hooks.example.test/too-big';
    const r = await runAsync(
      'hello',
      'echo',
      { pad: 'x'.repeat(500) },
      `&webhookEndpoint=${encodeURIComponent(endpoint)}`,
    );
    const runId = String(r.headers['x-request-id']);
    expect((await waitForState('hello', runId)).state).toBe('success');
    const consumer = await jetstream(nc).consumers.get(WEBHOOKS_STREAM, WEBHOOKS_CONSUMER);
    const forRun: WebhookJob[] = [];
    for (;;) {
      const msg = await consumer.next({ expires: 2_000 });
      if (!msg) break;
      msg.ack();
      const j = msg.json<WebhookJob>();
      if (j.requestId === runId) forRun.push(j);
    }
    expect(forRun.map((j) => Buffer.from(j.response.bodyBase64, 'base64').length)).toEqual([]);
  });
});

describe('webhook job over the NATS max_payload', () => {
  it('is not forwarded, and the run still succeeds after one execution', async () => {
    await worker.stop(10_000);
    worker = createRunWorker({
      nc,
      resolver,
      log: silentLogger(),
      registry: new Registry(),
      settings: { ...DEFAULT_RUN_WORKER_SETTINGS, ackWaitMs: ACK_WAIT_MS, pullExpiresMs: 1_000 },
    });
    await worker.start();
    // Under maxWebhookBodyBytes (768 KiB), but base64 plus the job envelope is over 1 MiB.
    const size = 786_000;
    expect(size + 2).toBeLessThanOrEqual(DEFAULT_RUN_WORKER_SETTINGS.maxWebhookBodyBytes);
    const endpoint = `http://hooks.example.test/${'p'.repeat(1500)}`;
    const r = await runAsync('hello', 'big', { size }, `&webhookEndpoint=${encodeURIComponent(endpoint)}`);
    expect(r.status).toBe(202);
    const runId = String(r.headers['x-request-id']);
    const rec = await waitForState('hello', runId);
    expect(rec.state).toBe('success');
    expect(rec.executions).toBe(1);
  });
});

describe('NATS outage', () => {
  it('an async call is refused with 503 queue_unavailable while NATS is down', async () => {
    await nats.stop({ keepStore: true });
    const r = await runAsync('hello', 'echo', {});
    expect(r.status).toBe(503);
    expect(JSON.parse(r.text).error.code).toBe('queue_unavailable');
    expect(r.headers['retry-after']).toBeTruthy();
  });

  it('after NATS is back, async calls are accepted again and the worker resumes', async () => {
    await nats.restart();
    let runId = '';
    await waitFor(
      'a 202 after the restart',
      async () => {
        const r = await runAsync('hello', 'echo', { back: true });
        runId = String(r.headers['x-request-id']);
        return r.status === 202;
      },
      RUN_WAIT_MS,
      500,
    );
    const rec = await waitForState('hello', runId);
    expect(rec.state).toBe('success');
  });
});
