/**
 * The gateway's balancer against real Python runtimes: replicaConcurrency holds (asserted from the
 * runtime's own clock), calls spread over replicas, the queue is bounded, two gateways keep one limit
 * (the runtime's 429 backstop), and a replica that is shutting down never fails a call.
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
import { DEFAULT_BALANCER_SETTINGS } from '../../../src/gateway/balancer/balancer.ts';
import { createObservedBalancer } from '../../../src/gateway/balancer/metrics.ts';
import { createGateway, type Gateway } from '../../../src/gateway/gateway.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../../../src/gateway/settings.ts';
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
import { maxOverlap } from '../../harness/overlap.ts';
import {
  closeServer,
  frontGateway,
  frontVerifier,
  type Runtime,
  replicaResolver,
  resolvedApp,
  startRuntime,
  tempDir,
} from './helpers.ts';

const P = 'proj-lb';
const dir = tempDir('apphost-lb-');

let nats: NatsServer;
let nc: NatsConnection;
let keys: KeySet;
let token: string;
const runtimes: Runtime[] = [];
const servers: Server[] = [];
const gateways: Gateway[] = [];

const app = (name: string, scaling: Parameters<typeof effectiveScaling>[0]): ResolvedApp =>
  resolvedApp(P, name, 'http://unused.invalid', { scaling: effectiveScaling(scaling) });

const resolver = replicaResolver([
  app('one', { replicaConcurrency: 1, maxReplicas: 1 }),
  app('two', { replicaConcurrency: 1, maxReplicas: 2 }),
  app('shared', { replicaConcurrency: 1, maxReplicas: 1 }),
  app('tiny', { replicaConcurrency: 1, maxReplicas: 1 }),
  app('vanish', { replicaConcurrency: 1, maxReplicas: 1 }),
  app('drain', { replicaConcurrency: 4, maxReplicas: 2 }),
]);

async function startGateway(
  balancerOver: Partial<typeof DEFAULT_BALANCER_SETTINGS> = {},
  registry = new Registry(),
): Promise<string> {
  const verifier = frontVerifier(createRunTokenVerifier(() => keys));
  const balancer = { ...DEFAULT_BALANCER_SETTINGS, ...balancerOver };
  const gateway = createGateway({
    resolver,
    verifyRunToken: verifier,
    nc,
    secretBox: createSecretBox('test-platform-key-0123456789'),
    log: silentLogger(),
    registry,
    settings: DEFAULT_GATEWAY_SETTINGS,
    balancer: createObservedBalancer(balancer, registry),
  });
  gateways.push(gateway);
  const l = await frontGateway(gateway, { resolver, verifier, balancer });
  servers.push(l.server);
  return l.url;
}

/** A counter's value for the given labels (0 when absent). */
async function counter(registry: Registry, name: string, labels: Record<string, string>): Promise<number> {
  const m = await registry.getSingleMetric(name)?.get();
  const v = m?.values.find((x) => Object.entries(labels).every(([k, want]) => x.labels[k] === want));
  return v?.value ?? 0;
}

async function call(base: string, appName: string, fn: string, body: unknown) {
  const res = await request(`${base}/v4/${P}/${appName}/${fn}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, json: JSON.parse(text) as Record<string, unknown> };
}

/** The runtime's record of each execution: [start, end] on its clock, and the serving pid. */
function executions(marker: string): Array<{ start: number; end: number; pid: number }> {
  return readFileSync(marker, 'utf8')
    .trim()
    .split('\n')
    .map((line) => {
      const [start, end, pid] = line.split(' ').map(Number);
      return { start: start ?? 0, end: end ?? 0, pid: pid ?? 0 };
    });
}

/** Most executions running at one instant, from the runtime's own timestamps. */

beforeAll(async () => {
  [nats, keys] = await Promise.all([startNats(), generateSigningKey().then((k) => ({ keys: [k] }))]);
  nc = await connect({ servers: nats.url });
  await ensureWebhooksStream(await jetstreamManager(nc));
  token = await issueRunToken(keys, P, new Date(Date.now() + 3600_000));
  runtimes.push(
    ...(await Promise.all([
      startRuntime(),
      startRuntime(),
      startRuntime(undefined, ['--max-concurrency', '1']),
      startRuntime(undefined, ['--grace-seconds', '30']),
      startRuntime(undefined, ['--grace-seconds', '30']),
    ])),
  );
});

afterAll(async () => {
  for (const s of servers) await closeServer(s);
  for (const g of gateways) await g.close();
  await nc?.close();
  await Promise.all(runtimes.map((r) => r.proc.stop(5_000)));
  await nats?.stop();
});

describe('replicaConcurrency', () => {
  it('with 1 and one replica, three concurrent 1 s calls never run two at once in the runtime', async () => {
    const [r1] = runtimes as [Runtime];
    resolver.set('one', [r1.url]);
    const base = await startGateway();
    const marker = join(dir, 'one');
    const results = await Promise.all(
      [1, 2, 3].map(() => call(base, 'one', 'timed', { marker, seconds: 1 })),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(maxOverlap(executions(marker))).toBe(1);
  });

  it('with 1 and two replicas, calls overlap across replicas but never on one', async () => {
    const [r1, r2] = runtimes as [Runtime, Runtime];
    resolver.set('two', [r1.url, r2.url]);
    const base = await startGateway();
    const marker = join(dir, 'two');
    const results = await Promise.all(
      [1, 2, 3, 4].map(() => call(base, 'two', 'timed', { marker, seconds: 1 })),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const runs = executions(marker);
    expect(maxOverlap(runs)).toBe(2);
    for (const pid of new Set(runs.map((r) => r.pid))) {
      expect(maxOverlap(runs.filter((r) => r.pid === pid))).toBe(1);
    }
    expect(new Set(runs.map((r) => r.pid)).size).toBe(2);
  });

  it('a full queue answers 503 queue_full at once; the queued call still succeeds', async () => {
    const [r1] = runtimes as [Runtime];
    resolver.set('tiny', [r1.url]);
    // One slot, and a queue of 1 × 1 × 1.
    const registry = new Registry();
    const base = await startGateway({ queueDepthFactor: 1 }, registry);
    // A first call, so that in native mode the token is known and the three below meet one queue, the
    // data plane's (a token's first call is Node's, whose own pool would take it).
    expect((await call(base, 'tiny', 'timed', { marker: join(dir, 'tiny-warm'), seconds: 0 })).status).toBe(
      200,
    );
    const marker = join(dir, 'tiny');
    const running = call(base, 'tiny', 'timed', { marker, seconds: 1 });
    const queued = call(base, 'tiny', 'timed', { marker, seconds: 0.1 });
    // Both are placed before the third arrives (the first runs, the second waits).
    await new Promise((r) => setTimeout(r, 200));
    const refused = await call(base, 'tiny', 'timed', { marker, seconds: 0.1 });
    expect(refused.status).toBe(503);
    expect(refused.json.error).toMatchObject({ code: 'queue_full' });
    expect([(await running).status, (await queued).status]).toEqual([200, 200]);
    // In native mode the data plane counts it (core.rs's tests), in its own series, which reach Node's
    // /metrics at a scrape (ask-metrics, design §5), not this registry: frontGateway serves no /metrics.
    if ((process.env.APPHOST_TEST_DATA_PLANE ?? 'node') === 'node')
      expect(
        await counter(registry, 'apphost_gateway_capacity_rejections_total', {
          app: 'tiny',
          code: 'queue_full',
        }),
      ).toBe(1);
  });
});

describe('replicas going to zero', () => {
  it('a call waiting for a slot is answered cold_start_timeout no later than its queue deadline', async () => {
    // Node mode: the call stays in the gateway's pool, which has no replica now. Native mode: the data
    // plane hands it to Node with its deadline (reason no_replica), and Node's pool holds it up to that.
    const [r1] = runtimes as [Runtime];
    resolver.set('vanish', [r1.url]);
    const base = await startGateway({ queueTimeoutMs: 1_500 });
    // A first call, so that in native mode the token is known and the calls below are the data plane's.
    expect(
      (await call(base, 'vanish', 'timed', { marker: join(dir, 'vanish-warm'), seconds: 0 })).status,
    ).toBe(200);
    const marker = join(dir, 'vanish');
    const running = call(base, 'vanish', 'timed', { marker, seconds: 2.5 });
    await new Promise((r) => setTimeout(r, 300));
    const queuedAt = Date.now();
    const waiting = call(base, 'vanish', 'timed', { marker, seconds: 0.1 });
    await new Promise((r) => setTimeout(r, 300));
    resolver.set('vanish', []);
    const answer = await waiting;
    const took = Date.now() - queuedAt;
    expect(answer.status).toBe(503);
    expect(answer.json.error).toEqual({
      code: 'cold_start_timeout',
      message: `app "${P}/vanish" had no ready replica within 1.5 s; retry later`,
    });
    // By its deadline (queueTimeoutMs after it started waiting), not a new cold-start bound (60 s).
    expect(took).toBeGreaterThanOrEqual(1_400);
    expect(took).toBeLessThan(2_400);
    // The call in flight finishes on the replica that left.
    expect((await running).status).toBe(200);
    expect(executions(marker)).toHaveLength(1);
  });
});

describe('two gateways', () => {
  it('keep one limit: the runtime refuses what the other gateway filled (429), and the call waits its turn', async () => {
    const shared = runtimes[2] as Runtime; // --max-concurrency 1
    resolver.set('shared', [shared.url]);
    const [ra, rb] = [new Registry(), new Registry()];
    const [a, b] = [await startGateway({}, ra), await startGateway({}, rb)];
    const marker = join(dir, 'shared');
    const results = await Promise.all(
      [a, b, a, b].map((base) => call(base, 'shared', 'timed', { marker, seconds: 0.5 })),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(maxOverlap(executions(marker))).toBe(1);
    const refused = async (r: Registry) =>
      counter(r, 'apphost_gateway_replica_refusals_total', { app: 'shared', reason: 'at_capacity' });
    expect((await refused(ra)) + (await refused(rb))).toBeGreaterThan(0);
  });
});

describe('a replica that is shutting down', () => {
  it('never fails a call: its refusals are retried on the other replica', async () => {
    const [, , , d1, d2] = runtimes as [Runtime, Runtime, Runtime, Runtime, Runtime];
    resolver.set('drain', [d1.url]);
    const base = await startGateway();
    const marker = join(dir, 'drain');
    // d1 keeps a call running (so it stays up, draining) while it refuses new ones.
    const long = call(base, 'drain', 'timed', { marker, seconds: 3 });
    await new Promise((r) => setTimeout(r, 300));
    resolver.set('drain', [d1.url, d2.url]);
    d1.proc.child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    // The gateway still routes to d1 (as it would until the EndpointSlice update arrives).
    const calls = await Promise.all(
      Array.from({ length: 8 }, () => call(base, 'drain', 'timed', { marker, seconds: 0.05 })),
    );
    expect(calls.map((c) => c.status)).toEqual(Array(8).fill(200));
    expect((await long).status).toBe(200);
  });
});
