/**
 * Run records and webhook delivery attempts through the real run store and delivery store over a
 * private NATS JetStream server: what the run worker and the dispatcher write is what the API shows.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceAccount } from '../../../src/management/service-accounts.ts';
import { createMemoryStore } from '../../../src/management/store/memory.ts';
import { createRunStore, ensureRunsInfrastructure, type RunStore } from '../../../src/runs/store.ts';
import { runCancelSubject } from '../../../src/shared/contracts/messaging.ts';
import { createDeliveryStore, type DeliveryStore } from '../../../src/webhooks/deliveries.ts';
import { openDeliveriesBucket } from '../../../src/webhooks/stream.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { call, type RunningApi, startApi } from './server.ts';

describe('runs over real NATS KV (run store + delivery store)', () => {
  let nats: NatsServer;
  let nc: NatsConnection;
  let api: RunningApi;
  let runs: RunStore;
  let deliveries: DeliveryStore;
  let token: string;
  const base = '/v2/projects/proj/apps/hello/runs';
  const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();

  beforeAll(async () => {
    nats = await startNats();
    nc = await connect({ servers: nats.url });
    const jsm = await jetstreamManager(nc);
    runs = createRunStore(await ensureRunsInfrastructure(jsm), nc);
    deliveries = createDeliveryStore(await openDeliveriesBucket(jsm));
    const store = createMemoryStore({ projects: { proj: ['hello'], other: ['hello'] } });
    token = (await createServiceAccount(store, 'proj', 'admin', new Date('2099-01-01'))).token;
    api = await startApi({ store, runs, deliveries });

    const rec = (runId: string, createdAt: string) => ({
      runId,
      projectId: 'proj',
      appName: 'hello',
      path: 'predict',
      state: 'queued' as const,
      createdAt,
      executions: 0,
    });
    for (const [id, s] of [
      ['r-fail', 1],
      ['r-run', 2],
      ['r-queue', 3],
    ] as const)
      expect(await runs.createQueued(rec(id, at(s)))).toBe(true);
    await runs.update('proj', 'hello', 'r-fail', (r) =>
      r
        ? {
            ...r,
            state: 'failure',
            startedAt: at(2),
            finishedAt: at(4),
            executions: 1,
            responseStatus: 500,
            error: { code: 'function_error', message: 'boom' },
            webhookHost: 'hooks.example.test',
          }
        : undefined,
    );
    await runs.update('proj', 'hello', 'r-run', (r) =>
      r ? { ...r, state: 'running', startedAt: at(3), executions: 1 } : undefined,
    );
    // The same project/app/run id in another project must not leak into this one.
    await runs.createQueued({ ...rec('r-fail', at(9)), projectId: 'other' });
    await deliveries.save(
      {
        requestId: 'r-fail',
        projectId: 'proj',
        appName: 'hello',
        endpointHost: 'hooks.example.test',
        state: 'failed',
        attempts: [
          { attempt: 1, at: at(5), outcome: 'http_retryable', status: 404, durationMs: 4 },
          { attempt: 2, at: at(7), outcome: 'network_error', error: 'ECONNRESET', durationMs: 9 },
          { attempt: 3, at: at(10), outcome: 'http_permanent', status: 410, durationMs: 5 },
        ],
        updatedAt: at(10),
      },
      0,
    );
  });
  afterAll(async () => {
    await api?.close();
    await nc?.close();
    await nats?.stop();
  });

  it('shows a failed run with each webhook attempt', async () => {
    const r = await call(api.url, 'GET', `${base}/r-fail`, { token });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({
      run_id: 'r-fail',
      state: 'failure',
      created_at: at(1),
      finished_at: at(4),
      error: { code: 'function_error', message: 'boom' },
      webhook_delivery: {
        state: 'failed',
        attempts: [
          { attempt: 1, outcome: 'http_retryable', status: 404 },
          { attempt: 2, outcome: 'network_error', error: 'ECONNRESET' },
          { attempt: 3, outcome: 'http_permanent', status: 410 },
        ],
      },
    });
  });

  it('lists newest first and filters by state', async () => {
    const all = await call(api.url, 'GET', base, { token });
    expect((all.body as { runs: Array<{ run_id: string }> }).runs.map((r) => r.run_id)).toEqual([
      'r-queue',
      'r-run',
      'r-fail',
    ]);
    const running = await call(api.url, 'GET', `${base}?state=running`, { token });
    expect((running.body as { runs: Array<{ run_id: string }> }).runs.map((r) => r.run_id)).toEqual([
      'r-run',
    ]);
  });

  it('cancels a queued run at once and announces the cancel of a running one', async () => {
    const queued = await call(api.url, 'DELETE', `${base}/r-queue`, { token });
    expect(queued.status, queued.text).toBe(202);
    expect(queued.body).toMatchObject({ state: 'cancelled', cancel_requested: true });

    const sub = nc.subscribe(runCancelSubject('r-run'), { max: 1 });
    const announced = (async () => {
      for await (const _m of sub) return true;
      return false;
    })();
    const running = await call(api.url, 'DELETE', `${base}/r-run`, { token });
    expect(running.status, running.text).toBe(202);
    expect(running.body).toMatchObject({ state: 'running', cancel_requested: true });
    expect(
      await Promise.race([
        announced,
        new Promise((r) => setTimeout(() => r('no announcement in 10 s'), 10_000)),
      ]),
    ).toBe(true);
    expect((await runs.get('proj', 'hello', 'r-run'))?.cancelRequested).toBe(true);

    const finished = await call(api.url, 'DELETE', `${base}/r-fail`, { token });
    expect(finished.status).toBe(409);
    expect((await runs.get('proj', 'hello', 'r-fail'))?.state).toBe('failure');
  });
});
