/**
 * How a run finishes when things fail around it: the final record is written before the webhook job, a
 * redelivery that finds the record final only queues its webhook job again (from the record, running
 * nothing), and writes wait out a NATS server that hangs instead of running the function again. A private
 * NATS server (this file stops it and deletes a stream) and the real Python runtime.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Consumer, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEFAULT_RUN_WORKER_SETTINGS } from '../../../src/runs/settings.ts';
import { createRunStore, ensureRunsInfrastructure, type RunStore } from '../../../src/runs/store.ts';
import { createRunWorker, type RunWorker } from '../../../src/runs/worker.ts';
import {
  type RunJob,
  type RunRecord,
  runSubject,
  TERMINAL_RUN_STATES,
  WEBHOOKS_STREAM,
  type WebhookJob,
} from '../../../src/shared/contracts/messaging.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { ensureWebhooksConsumer, WEBHOOKS_CONSUMER } from '../../../src/webhooks/stream.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { waitFor } from '../../harness/process.ts';
import { type Runtime, resolvedApp, startRuntime, staticResolver, tempDir } from '../gateway/helpers.ts';

const P = 'proj-finish';
const APP = 'hello';
/** Bound on a run finishing or its webhook job arriving. */
const WAIT_MS = 30_000;
/** Longer than two JetStream request timeouts (5 s each): a worker that gives up on a write would do so. */
const HANG_MS = 12_000;

let nats: NatsServer;
let nc: NatsConnection;
let runtime: Runtime;
let worker: RunWorker;
let store: RunStore;
let hooks: Consumer;
const dir = tempDir('apphost-finish-');
const target = { endpoint: 'http://hooks.example.test/finish' };

function runJob(fn: string, args: unknown): RunJob {
  return {
    v: 1,
    requestId: randomUUID(),
    projectId: P,
    appName: APP,
    path: fn,
    query: '',
    headers: { 'content-type': 'application/json' },
    bodyBase64: Buffer.from(JSON.stringify(args)).toString('base64'),
    webhook: target,
    acceptedAt: new Date().toISOString(),
    gracePeriodSeconds: 60,
  };
}

async function enqueue(job: RunJob): Promise<void> {
  await jetstream(nc).publish(runSubject(P, APP), JSON.stringify(job), { msgID: job.requestId });
}

async function finished(runId: string): Promise<RunRecord> {
  let rec: RunRecord | undefined;
  await waitFor(
    `run ${runId} final`,
    async () => {
      rec = await store.get(P, APP, runId);
      return !!rec && TERMINAL_RUN_STATES.includes(rec.state);
    },
    WAIT_MS,
  );
  return rec as RunRecord;
}

/** The webhook jobs queued for `runId` within `ms` (others are acked and skipped). */
async function webhookJobs(runId: string, ms: number): Promise<WebhookJob[]> {
  const found: WebhookJob[] = [];
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const msg = await hooks.next({ expires: Math.max(1_000, Math.min(5_000, deadline - Date.now())) });
    if (!msg) {
      if (found.length > 0) break;
      continue;
    }
    msg.ack();
    const j = msg.json<WebhookJob>();
    if (j.requestId === runId) found.push(j);
  }
  return found;
}

/** The final record a worker wrote for `job` before it was killed (its message still unacked). */
function finalSuccessRecord(
  job: RunJob,
  answer: Buffer,
  finishedAt: string,
  executions: number,
  result: Partial<RunRecord['result']> = {},
): RunRecord {
  return {
    runId: job.requestId,
    projectId: P,
    appName: APP,
    path: job.path,
    state: 'success',
    createdAt: job.acceptedAt,
    startedAt: finishedAt,
    finishedAt,
    executions,
    responseStatus: 200,
    webhookHost: 'hooks.example.test',
    result: {
      kept: 'complete',
      contentType: 'application/json',
      sizeBytes: answer.length,
      keptBytes: answer.length,
      ...result,
    },
  };
}

const starts = (marker: string) =>
  existsSync(marker) ? readFileSync(marker, 'utf8').trim().split('\n').filter(Boolean).length : 0;

beforeAll(async () => {
  [nats, runtime] = await Promise.all([startNats(), startRuntime()]);
  nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 200 });
  const jsm = await jetstreamManager(nc);
  await ensureWebhooksConsumer(jsm);
  store = createRunStore(await ensureRunsInfrastructure(jsm), nc);
  hooks = await jetstream(nc).consumers.get(WEBHOOKS_STREAM, WEBHOOKS_CONSUMER);
  worker = createRunWorker({
    nc,
    resolver: staticResolver([
      resolvedApp(P, APP, runtime.url, { functions: ['started_then_sleep', 'gated', 'big'] }),
    ]),
    log: silentLogger(),
    registry: new Registry(),
    // The default ack wait (30 s) outlasts HANG_MS: a redelivery here would be the worker's own doing.
    settings: { ...DEFAULT_RUN_WORKER_SETTINGS, concurrency: 2, pullExpiresMs: 1_000 },
  });
  await worker.start();
});

afterAll(async () => {
  try {
    nats?.signal('SIGCONT');
  } catch {
    // not running
  }
  await worker?.stop(5_000);
  await nc?.close().catch(() => undefined);
  await runtime?.proc.stop(5_000);
  await nats?.stop();
});

it('a redelivered run whose record is final queues its webhook job from that record and runs nothing', async () => {
  const marker = join(dir, 'final-starts');
  const job = runJob('started_then_sleep', { marker, seconds: 0.1 });
  // What a worker killed between writing the final record and queueing the webhook job leaves behind:
  // the record (3 executions: the redelivery cap), the result bytes, and the message unacked.
  const answer = Buffer.from(JSON.stringify({ from: 'the third execution' }));
  const finishedAt = new Date(Date.now() - 60_000).toISOString();
  await store.putResult(P, APP, job.requestId, answer);
  await store.update(P, APP, job.requestId, () => finalSuccessRecord(job, answer, finishedAt, 3));
  await enqueue(job);

  const [hook, ...more] = await webhookJobs(job.requestId, WAIT_MS);
  expect(more).toEqual([]);
  expect(hook).toMatchObject({
    runStatus: 'success',
    completedAt: finishedAt,
    target,
    response: { status: 200, contentType: 'application/json' },
  });
  expect(Buffer.from(hook?.response.bodyBase64 ?? '', 'base64')).toEqual(answer);
  const rec = await store.get(P, APP, job.requestId);
  expect(rec).toMatchObject({ state: 'success', executions: 3, finishedAt });
  expect(starts(marker)).toBe(0);
});

it('a redelivered run whose final record carries its result inline queues the webhook with those bytes', async () => {
  const marker = join(dir, 'inline-starts');
  const job = runJob('started_then_sleep', { marker, seconds: 0.1 });
  // What a worker killed after writing a final record with a small result (no result key) leaves behind.
  const answer = Buffer.from(JSON.stringify({ from: 'the record itself' }));
  const finishedAt = new Date(Date.now() - 60_000).toISOString();
  await store.update(P, APP, job.requestId, () =>
    finalSuccessRecord(job, answer, finishedAt, 1, { inlineBase64: answer.toString('base64') }),
  );
  await enqueue(job);

  const [hook, ...more] = await webhookJobs(job.requestId, WAIT_MS);
  expect(more).toEqual([]);
  expect(hook).toMatchObject({ runStatus: 'success', completedAt: finishedAt, response: { status: 200 } });
  expect(Buffer.from(hook?.response.bodyBase64 ?? '', 'base64')).toEqual(answer);
  expect(starts(marker)).toBe(0);
});

it('a body the result does not hold whole is stored for the webhook, so a redelivery can queue it', async () => {
  const job = runJob('started_then_sleep', { marker: join(dir, 'unused'), seconds: 0.1 });
  const whole = Buffer.from(JSON.stringify({ text: 'y'.repeat(4_000) }));
  const finishedAt = new Date().toISOString();
  await store.putResult(P, APP, job.requestId, whole.subarray(0, 100));
  await store.putWebhookBody(P, APP, job.requestId, whole);
  await store.update(P, APP, job.requestId, () =>
    finalSuccessRecord(job, whole, finishedAt, 1, { kept: 'truncated', keptBytes: 100 }),
  );
  await enqueue(job);
  const [hook] = await webhookJobs(job.requestId, WAIT_MS);
  expect(Buffer.from(hook?.response.bodyBase64 ?? '', 'base64')).toEqual(whole);
  // Removed once its job is queued.
  await waitFor(
    'the stored webhook body removed',
    async () => (await store.getWebhookBody(P, APP, job.requestId)) === undefined,
    WAIT_MS,
  );
});

it('the record is final before the webhook job is queued: with WEBHOOKS refusing, the run is done once and its job follows', async () => {
  const marker = join(dir, 'order-starts');
  const job = runJob('started_then_sleep', { marker, seconds: 0.1 });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(WEBHOOKS_STREAM);
  try {
    await enqueue(job);
    const rec = await finished(job.requestId);
    // Final while its webhook job cannot be queued: a later verdict can never contradict a sent webhook.
    expect(rec).toMatchObject({ state: 'success', executions: 1 });
  } finally {
    await ensureWebhooksConsumer(jsm);
    hooks = await jetstream(nc).consumers.get(WEBHOOKS_STREAM, WEBHOOKS_CONSUMER);
  }
  const [hook, ...more] = await webhookJobs(job.requestId, WAIT_MS);
  expect(more).toEqual([]);
  expect(hook).toMatchObject({ runStatus: 'success', response: { status: 200 } });
  expect(starts(marker)).toBe(1);
  expect((await store.get(P, APP, job.requestId))?.executions).toBe(1);
});

it('writes wait out a NATS server that hangs while the run finishes: executed once, recorded, webhook queued', async () => {
  const marker = join(dir, 'hang-starts');
  const gate = join(dir, 'hang-gate');
  const job = runJob('gated', { gate, marker });
  await enqueue(job);
  await waitFor('the function started', async () => starts(marker) === 1, WAIT_MS);
  await waitFor(
    'the run recorded running',
    async () => (await store.get(P, APP, job.requestId))?.state === 'running',
    WAIT_MS,
  );
  nats.signal('SIGSTOP');
  try {
    writeFileSync(gate, ''); // the function returns while NATS hangs: its result and record wait
    await new Promise((r) => setTimeout(r, HANG_MS));
  } finally {
    nats.signal('SIGCONT');
  }
  const rec = await finished(job.requestId);
  expect(rec).toMatchObject({ state: 'success', executions: 1, result: { kept: 'complete' } });
  const [hook] = await webhookJobs(job.requestId, WAIT_MS);
  expect(hook?.runStatus).toBe('success');
  expect(starts(marker)).toBe(1);
});
