/**
 * Sync calls as run records (mode `sync`): the gateway records each finished call on the SYNC_CALLS
 * stream without waiting for it, and the management API lists them beside async runs, filtered by
 * mode. Real runtime, real NATS JetStream, real HTTP.
 */
import type { Server } from 'node:http';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBalancer, DEFAULT_BALANCER_SETTINGS } from '../../../src/gateway/balancer/balancer.ts';
import { createGateway, type Gateway } from '../../../src/gateway/gateway.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../../../src/gateway/settings.ts';
import { withSyncCalls } from '../../../src/management/run-reader.ts';
import { createServiceAccount } from '../../../src/management/service-accounts.ts';
import { createMemoryStore } from '../../../src/management/store/memory.ts';
import { ensureSyncCallsStream } from '../../../src/runs/infrastructure.ts';
import { createRunStore, ensureRunsInfrastructure, type RunStore } from '../../../src/runs/store.ts';
import { createSyncCallReader, type SyncCallReader } from '../../../src/runs/sync-call-reader.ts';
import type { RunRecord } from '../../../src/shared/contracts/messaging.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { SYNC_CALLS_PER_APP } from '../../../src/shared/nats/jetstream.ts';
import { createRunTokenVerifier, generateSigningKey, issueRunToken } from '../../../src/shared/run-tokens.ts';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { waitFor } from '../../harness/process.ts';
import { memoryDeliveries } from '../management/fixtures.ts';
import { call as apiCall, type RunningApi, startApi } from '../management/server.ts';
import {
  closeServer,
  frontGateway,
  frontVerifier,
  type Runtime,
  resolvedApp,
  startRuntime,
  staticResolver,
} from './helpers.ts';

const P = 'proj-s';
/** Bound on a fire-and-forget record reaching the stream (a busy machine). */
const RECORD_TIMEOUT_MS = 20_000;

let nats: NatsServer;
let nc: NatsConnection;
let runtime: Runtime;
let gateway: Gateway;
let server: Server;
let base: string;
let token: string;
let reader: SyncCallReader;
let runs: RunStore;
let api: RunningApi;
let apiToken: string;
const resolver = staticResolver([]);

async function run(path: string, body = '{}', headers: Record<string, string> = {}) {
  const res = await fetch(`${base}/v4/${P}/${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    body,
  });
  const text = await res.text();
  return { status: res.status, requestId: res.headers.get('x-request-id') ?? '', text };
}

/** The record of `requestId` once the stream has it. */
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

beforeAll(async () => {
  let keys: Awaited<ReturnType<typeof generateSigningKey>>;
  [nats, runtime, keys] = await Promise.all([startNats(), startRuntime(), generateSigningKey()]);
  nc = await connect({ servers: nats.url });
  const jsm = await jetstreamManager(nc);
  runs = createRunStore(await ensureRunsInfrastructure(jsm), nc);
  await ensureSyncCallsStream(jsm);
  reader = createSyncCallReader(nc, { timeoutMs: 10_000 });
  token = await issueRunToken({ keys: [keys] }, P, new Date(Date.now() + 3600_000));
  resolver.apps.push(
    resolvedApp(P, 'hello', runtime.url, { functions: ['echo', 'sleep', 'boom', 'ticks', 'forever'] }),
    resolvedApp(P, 'other', runtime.url, { functions: ['echo'] }),
  );
  const verifier = frontVerifier(createRunTokenVerifier(() => ({ keys: [keys] })));
  const settings = {
    ...DEFAULT_GATEWAY_SETTINGS,
    syncTimeoutMs: 3_000,
    // Every call of this test is recorded: the bounds have their own unit test.
    syncRecordsPerAppPerSecond: 1_000,
    syncRecordsPerSecond: 1_000,
  };
  gateway = createGateway({
    resolver,
    verifyRunToken: verifier,
    nc,
    secretBox: createSecretBox('test-platform-key-0123456789'),
    log: silentLogger(),
    registry: new Registry(),
    settings,
    balancer: createBalancer(DEFAULT_BALANCER_SETTINGS),
    runStore: runs,
  });
  const l = await frontGateway(gateway, { resolver, verifier, settings });
  server = l.server;
  base = l.url;
  const store = createMemoryStore({ projects: { [P]: ['hello', 'other'], theirs: ['hello'] } });
  apiToken = (await createServiceAccount(store, P, 'admin', new Date(Date.now() + 86_400_000))).token;
  api = await startApi({ store, runs: withSyncCalls(runs, reader), deliveries: memoryDeliveries() });
});

afterAll(async () => {
  await api?.close();
  if (server) await closeServer(server);
  await gateway?.close();
  await nc?.close();
  await runtime?.proc.stop(5_000);
  await nats?.stop();
});

describe('the gateway records sync calls', () => {
  it('records a successful call with its path, status and timings, and no body', async () => {
    const r = await run('hello/echo', '{"secret":"not-in-the-record"}');
    expect(r.status).toBe(200);
    const rec = await recorded('hello', r.requestId);
    expect(rec).toMatchObject({
      mode: 'sync',
      runId: r.requestId,
      projectId: P,
      appName: 'hello',
      path: 'echo',
      state: 'success',
      responseStatus: 200,
      executions: 1,
    });
    expect(Date.parse(rec.finishedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(rec.createdAt));
    expect(rec.result).toBeUndefined();
    expect(JSON.stringify(rec)).not.toContain('not-in-the-record');
  });

  it('records a function error as failure, a sync timeout as timeout, a stream as streamed', async () => {
    const boom = await run('hello/boom');
    expect(boom.status).toBe(500);
    expect(await recorded('hello', boom.requestId)).toMatchObject({ state: 'failure', responseStatus: 500 });

    const slow = await run('hello/sleep', '{"seconds": 10}');
    expect(slow.status).toBe(504);
    expect(await recorded('hello', slow.requestId)).toMatchObject({
      state: 'timeout',
      responseStatus: 504,
      error: { code: 'upstream_timeout' },
    });

    const stream = await run('hello/ticks', '{"count": 2}', { accept: 'text/event-stream' });
    expect(stream.status).toBe(200);
    expect(await recorded('hello', stream.requestId)).toMatchObject({ state: 'success', streamed: true });
  });

  it('records a caller that went away as cancelled', async () => {
    const ac = new AbortController();
    const res = await fetch(`${base}/v4/${P}/hello/forever`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ marker: '/dev/null' }),
      signal: ac.signal,
    });
    const id = res.headers.get('x-request-id') ?? '';
    await res.body?.getReader().read();
    ac.abort();
    expect(await recorded('hello', id)).toMatchObject({
      state: 'cancelled',
      error: { code: 'client_closed' },
    });
  });

  it('records no async run (it has its own record) and no call that reached no app', async () => {
    const queued = await run('hello/echo?async=true');
    expect(queued.status).toBe(202);
    const unknown = await run('nope/echo');
    expect(unknown.status).toBe(404);
    // A sync call made after both is recorded: anything before it would be there too by now.
    const after = await run('hello/echo');
    await recorded('hello', after.requestId);
    expect(await reader.get(P, 'hello', queued.requestId)).toBeUndefined();
    expect(await reader.find(P, unknown.requestId)).toBeUndefined();
    expect((await runs.get(P, 'hello', queued.requestId))?.mode).toBeUndefined();
  });

  it('keeps the newest records of each app, so one busy app does not push out another', async () => {
    const quiet = await run('other/echo');
    await recorded('other', quiet.requestId);
    for (let i = 0; i < SYNC_CALLS_PER_APP + 4; i++) await run('hello/echo');
    // The newest by its start (ms): in native mode a call on a connection handed to Node is recorded at
    // once and one the data plane served in its 10 ms batch, so calls started in the same ms may be
    // recorded in either order. The last call starts in a later ms than the others.
    await new Promise((r) => setTimeout(r, 2));
    const last = (await run('hello/echo')).requestId;
    await recorded('hello', last);
    const kept = await reader.list(P, 'hello', { limit: 1000 });
    expect(kept).toHaveLength(SYNC_CALLS_PER_APP);
    expect(kept[0]?.runId).toBe(last);
    expect(await reader.get(P, 'other', quiet.requestId)).toBeDefined();
  });
});

describe('the runs API shows sync calls beside async runs', () => {
  const list = async (query: string) => {
    const r = await apiCall(api.url, 'GET', `/v2/projects/${P}/runs${query}`, { token: apiToken });
    expect(r.status, r.text).toBe(200);
    return (r.body as { runs: Array<{ run_id: string; mode: string; app_name: string }> }).runs;
  };

  it('lists both modes by default and one with ?mode=, and gets a sync call by its id', async () => {
    const queued = await run('other/echo?async=true');
    expect(queued.status).toBe(202);
    const sync = await run('other/echo');
    await recorded('other', sync.requestId);

    const all = await list('?app=other&limit=100');
    expect(all.map((r) => r.mode)).toContain('sync');
    expect(all.find((r) => r.run_id === queued.requestId)?.mode).toBe('async');
    expect(all.find((r) => r.run_id === sync.requestId)?.mode).toBe('sync');
    expect(new Set((await list('?app=other&mode=sync&limit=100')).map((r) => r.mode))).toEqual(
      new Set(['sync']),
    );
    expect((await list('?app=other&mode=async&limit=100')).map((r) => r.run_id)).toEqual([queued.requestId]);

    const got = await apiCall(api.url, 'GET', `/v2/projects/${P}/runs/${sync.requestId}`, {
      token: apiToken,
    });
    expect(got.status, got.text).toBe(200);
    expect(got.body).toMatchObject({
      run_id: sync.requestId,
      mode: 'sync',
      state: 'success',
      app_name: 'other',
    });
    // A recorded sync call is over: cancelling it is a conflict, as for any finished run.
    const cancel = await apiCall(api.url, 'DELETE', `/v2/projects/${P}/runs/${sync.requestId}`, {
      token: apiToken,
    });
    expect(cancel.status, cancel.text).toBe(409);
    const bad = await apiCall(api.url, 'GET', `/v2/projects/${P}/runs?mode=batch`, { token: apiToken });
    expect(bad.status).toBe(400);
  });

  it("never shows another project's sync calls", async () => {
    const mine = await run('hello/echo');
    await recorded('hello', mine.requestId);
    expect(await reader.find('theirs', mine.requestId)).toBeUndefined();
    expect(await reader.list('theirs', undefined, {})).toEqual([]);
  });
});
