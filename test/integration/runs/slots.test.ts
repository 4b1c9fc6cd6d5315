/**
 * Async runs take replica slots through the gateway's balancer, like sync calls: a run never runs
 * beside a sync call beyond replicaConcurrency (asserted from the runtime's clock), a run for an app
 * with no ready replica stays queued (not an execution) and runs once one is ready, and a run for an
 * app that cannot start fails saying why.
 */
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { effectiveScaling } from '../../../src/apis/v1alpha1/scaling.ts';
import { createBalancer, DEFAULT_BALANCER_SETTINGS } from '../../../src/gateway/balancer/balancer.ts';
import { createGateway, type Gateway } from '../../../src/gateway/gateway.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../../../src/gateway/settings.ts';
import { DEFAULT_RUN_WORKER_SETTINGS } from '../../../src/runs/settings.ts';
import { createRunStore, ensureRunsInfrastructure, type RunStore } from '../../../src/runs/store.ts';
import { createRunWorker, type RunWorker } from '../../../src/runs/worker.ts';
import type { RunRecord } from '../../../src/shared/contracts/messaging.ts';
import type { ResolvedApp } from '../../../src/shared/contracts/seams.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import {
  createRunTokenVerifier,
  generateSigningKey,
  issueRunToken,
  type KeySet,
} from '../../../src/shared/run-tokens.ts';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { ensureWebhooksStream } from '../../../src/webhooks/stream.ts';
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
} from '../gateway/helpers.ts';

const P = 'proj-slots';
const dir = tempDir('apphost-slots-');
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

const one = effectiveScaling({ replicaConcurrency: 1, maxReplicas: 1 });
const app = (name: string, over: Partial<ResolvedApp> = {}): ResolvedApp =>
  resolvedApp(P, name, 'http://unused.invalid', { scaling: one, ...over });
const resolver = replicaResolver([app('single'), app('cold'), app('broken')]);

async function post(appName: string, fn: string, body: unknown, async = false) {
  const res = await request(`${base}/v4/${P}/${appName}/${fn}${async ? '?async=true' : ''}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, json: JSON.parse(text) as Record<string, unknown> };
}

async function record(appName: string, runId: string): Promise<RunRecord | undefined> {
  return store.get(P, appName, runId);
}

beforeAll(async () => {
  [nats, runtime, keys] = await Promise.all([
    startNats(),
    startRuntime(),
    generateSigningKey().then((k) => ({ keys: [k] })),
  ]);
  nc = await connect({ servers: nats.url });
  const jsm = await jetstreamManager(nc);
  await ensureWebhooksStream(jsm);
  store = createRunStore(await ensureRunsInfrastructure(jsm), nc);
  token = await issueRunToken(keys, P, new Date(Date.now() + 3600_000));
  gateway = createGateway({
    resolver,
    verifyRunToken: createRunTokenVerifier(() => keys),
    nc,
    secretBox: createSecretBox('test-platform-key-0123456789'),
    log: silentLogger(),
    registry: new Registry(),
    settings: DEFAULT_GATEWAY_SETTINGS,
    balancer: createBalancer({
      ...DEFAULT_BALANCER_SETTINGS,
      coldStartTimeoutMs: 500,
      queueTimeoutMs: 10_000,
    }),
  });
  worker = createRunWorker({
    nc,
    resolver,
    callApp: gateway.callApp,
    log: silentLogger(),
    registry: new Registry(),
    settings: { ...DEFAULT_RUN_WORKER_SETTINGS, concurrency: 4, pullExpiresMs: 1_000, capacityRetryMs: 300 },
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
  await nc?.close();
  await runtime?.proc.stop(5_000);
  await nats?.stop();
});

describe('async runs take replica slots', () => {
  it('a run waits for the slot a sync call holds: they never overlap in the runtime', async () => {
    resolver.set('single', [runtime.url]);
    const marker = join(dir, 'single');
    const sync = post('single', 'timed', { marker, seconds: 1 });
    await new Promise((r) => setTimeout(r, 100));
    const accepted = await post('single', 'timed', { marker, seconds: 0.5 }, true);
    expect(accepted.status).toBe(202);
    expect((await sync).status).toBe(200);
    const runId = String(accepted.json.run_id);
    await waitFor('run done', async () => (await record('single', runId))?.state === 'success', 30_000);
    const lines = readFileSync(marker, 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split(' ').map(Number));
    expect(lines).toHaveLength(2);
    const [a, b] = lines as [number[], number[]];
    // The run started after the sync call ended (the runtime's own clock).
    expect((b[0] ?? 0) >= (a[1] ?? 0) || (a[0] ?? 0) >= (b[1] ?? 0)).toBe(true);
  });

  it('a run for an app with no ready replica stays queued (no execution), then runs once one is ready', async () => {
    resolver.set('cold', []);
    const accepted = await post('cold', 'echo', { hello: 'cold' }, true);
    expect(accepted.status).toBe(202);
    const runId = String(accepted.json.run_id);
    // Several cold-start bounds pass: still queued, never started.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await record('cold', runId)).toMatchObject({ state: 'queued', executions: 0 });
    resolver.set('cold', [runtime.url]);
    await waitFor('run done', async () => (await record('cold', runId))?.state === 'success', 30_000);
    expect((await record('cold', runId))?.executions).toBe(1);
  });

  it('a run for an app that cannot start fails with the cause, without running', async () => {
    resolver.set('broken', []);
    resolver.fail('broken', {
      reason: 'CrashLoopBackOff',
      message: "cannot import /app/main.py: ModuleNotFoundError: No module named 'numpy'",
    });
    const accepted = await post('broken', 'echo', {}, true);
    expect(accepted.status).toBe(202);
    const runId = String(accepted.json.run_id);
    await waitFor('run failed', async () => (await record('broken', runId))?.state === 'failure', 30_000);
    const rec = await record('broken', runId);
    expect(rec?.executions).toBe(0);
    expect(rec?.error?.code).toBe('app_start_failed');
    expect(rec?.error?.message).toContain("No module named 'numpy'");
  });
});
