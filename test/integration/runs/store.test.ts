/**
 * The run worker writes a run's record from what it last read or wrote (`read` / `change(..., from)`),
 * one round trip per step instead of a read and a write. These cases prove that skipping the re-read
 * never loses a change made in between, nor counts an execution twice, against a real JetStream KV.
 */
import { randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { finishRun, queuedRecordFor, startRun } from '../../../src/runs/outcome.ts';
import { createRunStore, ensureRunsInfrastructure, type RunStore } from '../../../src/runs/store.ts';
import { type RunJob, runKey } from '../../../src/shared/contracts/messaging.ts';
import { type AckInbox, createAckInbox } from '../../../src/shared/nats/ack-inbox.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';

const P = 'proj-store';
const APP = 'hello';

let nats: NatsServer;
let nc: NatsConnection;
let store: RunStore;
let kv: KV;
let acks: AckInbox;

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
  kv = await ensureRunsInfrastructure(await jetstreamManager(nc));
  store = createRunStore(kv, nc);
  acks = createAckInbox(nc);
});

afterAll(async () => {
  acks?.close();
  await nc?.close();
  await nats?.stop();
});

function queuedJob(): RunJob {
  return {
    v: 1,
    requestId: randomUUID(),
    projectId: P,
    appName: APP,
    path: 'hello',
    query: '',
    headers: {},
    bodyBase64: '',
    acceptedAt: new Date().toISOString(),
    gracePeriodSeconds: 60,
  };
}

async function accepted(): Promise<RunJob> {
  const job = queuedJob();
  expect(await store.createQueued(queuedRecordFor(job))).toBe(true);
  return job;
}

it('start and finish from what the worker read and wrote: each write moves the revision by one', async () => {
  const job = await accepted();
  const read = await store.read(P, APP, job.requestId);
  expect(read.record?.state).toBe('queued');
  const started = await store.change(
    P,
    APP,
    job.requestId,
    (cur) => startRun(cur, job, new Date(), 'exec-1'),
    read,
  );
  expect(started.record).toMatchObject({ state: 'running', executions: 1, executionId: 'exec-1' });
  expect(started.revision).toBeGreaterThan(read.revision);
  const done = await store.change(
    P,
    APP,
    job.requestId,
    (cur) => finishRun(cur, job, { state: 'cancelled' }, new Date()),
    started,
  );
  expect(done.record?.state).toBe('cancelled');
  expect(await store.read(P, APP, job.requestId)).toEqual(done);
});

it('a cancel between the read and the start wins: the stale read is re-read, the run is not started', async () => {
  const job = await accepted();
  const read = await store.read(P, APP, job.requestId);
  expect((await store.requestCancel(P, APP, job.requestId))?.state).toBe('cancelled');
  const after = await store.change(
    P,
    APP,
    job.requestId,
    (cur) => startRun(cur, job, new Date(), 'exec-1'),
    read,
  );
  expect(after.record).toMatchObject({ state: 'cancelled', executions: 0 });
});

it('a start whose answer was lost, written again from the same read, is not a second execution', async () => {
  const job = await accepted();
  const read = await store.read(P, APP, job.requestId);
  const decide = (cur: Parameters<typeof startRun>[0]) => startRun(cur, job, new Date(), 'exec-1');
  await store.change(P, APP, job.requestId, decide, read);
  // The retry (same execution, same stale read) finds its own write and leaves it.
  const again = await store.change(P, APP, job.requestId, decide, read);
  expect(again.record).toMatchObject({ state: 'running', executions: 1, executionId: 'exec-1' });
});

it('a cancel request while running is kept by the final write from the running revision', async () => {
  const job = await accepted();
  const started = await store.change(P, APP, job.requestId, (cur) =>
    startRun(cur, job, new Date(), 'exec-1'),
  );
  expect((await store.requestCancel(P, APP, job.requestId))?.cancelRequested).toBe(true);
  const done = await store.change(
    P,
    APP,
    job.requestId,
    (cur) => finishRun(cur, job, { state: 'cancelled' }, new Date()),
    started,
  );
  expect(done.record).toMatchObject({ state: 'cancelled', cancelRequested: true, executions: 1 });
  // A final record is never overwritten, whatever the caller last saw.
  const late = await store.change(
    P,
    APP,
    job.requestId,
    (cur) => finishRun(cur, job, { state: 'failure', error: { code: 'x', message: 'x' } }, new Date()),
    started,
  );
  expect(late.record?.state).toBe('cancelled');
});

it("creates a queued record through the gateway's ack inbox: once, readable, and again after a delete", async () => {
  const viaInbox = createRunStore(kv, nc, undefined, acks);
  const job = queuedJob();
  expect(await viaInbox.createQueued(queuedRecordFor(job))).toBe(true);
  expect(await store.get(P, APP, job.requestId)).toEqual(queuedRecordFor(job));
  // A record that exists already (a worker got there first) is not overwritten.
  const other = { ...queuedRecordFor(job), createdAt: 'later' };
  expect(await viaInbox.createQueued(other)).toBe(false);
  expect((await store.get(P, APP, job.requestId))?.createdAt).toBe(queuedRecordFor(job).createdAt);
  // A deleted key is created again (nats.js's create decides, as without the inbox).
  await kv.delete(runKey(P, APP, job.requestId));
  expect(await viaInbox.createQueued(queuedRecordFor(job))).toBe(true);
  expect((await store.read(P, APP, job.requestId)).record?.state).toBe('queued');
});
