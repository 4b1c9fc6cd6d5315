/**
 * The gateway process in native mode (APPHOST_GATEWAY_DATA_PLANE=native) as main.ts builds it (entry.ts:
 * a static resolver), with the real data plane binary, real NATS and the real runtime: the data plane
 * owns the port, serves a known token's call and hands the rest to Node (a custom domain's call among
 * them), the calls it serves reach the autoscaler (`<reporter>-dp`) and the runs API (records), /readyz
 * includes the data plane, a killed data plane makes the pod unready until its respawn,
 * SIGTERM drains both and exits 0. Node mode is what every other gateway suite runs.
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROCESS_ANSWER_TIMEOUT_MS } from '../../../src/gateway/questions.ts';
import { createSyncCallReader } from '../../../src/runs/sync-call-reader.ts';
import type { RunRecord } from '../../../src/shared/contracts/messaging.ts';
import { LOAD_SUBJECTS, type LoadReport } from '../../../src/shared/contracts/scaling.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { freePort, waitFor } from '../../harness/process.ts';
import { buildDataPlane, noCargo, spawnNativeGateway } from './dataplane-binary.ts';
import { closeServer, listen, type Runtime, resolvedApp, sample, startRuntime, tempDir } from './helpers.ts';

const P = 'proj-native';
const START_TIMEOUT_MS = 60_000;
/** A custom domain of P, assigned to the app `shop` (a real HTTP server that answers what it was asked). */
const SHOP_HOST = 'shop.native-test.example';
const skip = noCargo();

describe.skipIf(!!skip)(
  `the gateway with APPHOST_GATEWAY_DATA_PLANE=native${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const dir = tempDir('apphost-native-');
    let nats: NatsServer;
    let runtime: Runtime;
    let child: ChildProcess;
    let port: number;
    let opsPort: number;
    let token: string;
    let shop: Awaited<ReturnType<typeof listen>>;
    const logFile = join(dir, 'gateway.log');

    beforeAll(async () => {
      const bin = buildDataPlane();
      [nats, runtime, port, opsPort, shop] = await Promise.all([
        startNats(),
        startRuntime(),
        freePort(),
        freePort(),
        listen((req, res) => {
          req.resume();
          req.on('end', () =>
            res
              .writeHead(200, { 'content-type': 'application/json' })
              .end(JSON.stringify({ app: 'shop', method: req.method, path: req.url })),
          );
        }),
      ]);
      ({ child, token } = await spawnNativeGateway({
        dir,
        bin,
        natsUrl: nats.url,
        port,
        opsPort,
        projectId: P,
        platformKey: 'native-test-platform-key-0123',
        apps: [resolvedApp(P, 'hello', runtime.url), resolvedApp(P, 'shop', shop.url, { runtime: 'custom' })],
        hosts: { [SHOP_HOST]: { projectId: P, appName: 'shop' } },
        logFile,
        startTimeoutMs: START_TIMEOUT_MS,
      }));
    });

    afterAll(async () => {
      if (child?.exitCode === null) child.kill('SIGKILL');
      await runtime?.proc.stop(5_000);
      if (shop) await closeServer(shop.server);
      await nats?.stop();
    });

    const call = (body: unknown, path = 'echo') =>
      request(`http://127.0.0.1:${port}/v4/${P}/hello/${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const readyz = async () => {
      const res = await fetch(`http://127.0.0.1:${opsPort}/readyz`);
      return { status: res.status, body: (await res.json()) as { failing?: string[] } };
    };
    const metrics = async () => (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();

    const handoffs = async () =>
      [...(await metrics()).matchAll(/apphost_gateway_dataplane_handoffs_total\{reason="(\w+)"\} (\d+)/g)]
        .filter((m) => m[2] !== '0')
        .map((m) => `${m[1]} ${m[2]}`);

    it("a token's first call is handed to Node; Node's verified token is pushed and the next call is served by the data plane", async () => {
      const first = await call({ x: 1 });
      const text = await first.body.text();
      expect(first.statusCode, text).toBe(200);
      expect(JSON.parse(text)).toEqual({ echo: { x: 1 } });
      const id = first.headers['x-request-id'];
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      // Node logged the handed-off call under the data plane's id.
      await waitFor('the access line', async () => readFileSync(logFile, 'utf8').includes(String(id)), 5_000);
      expect(await handoffs()).toEqual(['token_miss 1']);
      // The token frame Node sent on remembering it lets the data plane serve the next call itself.
      await waitFor(
        'the token applied',
        async () => {
          const res = await call({ x: 2 });
          expect(res.statusCode).toBe(200);
          expect(await res.body.json()).toEqual({ echo: { x: 2 } });
          return (await handoffs()).join() === 'token_miss 1';
        },
        5_000,
      );
      expect(await metrics()).toMatch(/apphost_gateway_dataplane_up 1/);
    });

    it("a call on a custom domain goes to the domain's app with its whole path, as in node mode, not to the app its path names", async () => {
      // The token is known to the data plane (the test above) and p/hello is in its table: without the
      // domain map, /v4/<P>/hello/echo would be served by hello. Node routes it to the domain's app.
      const res = await request(`http://127.0.0.1:${port}/v4/${P}/hello/echo`, {
        method: 'POST',
        headers: {
          host: 'Shop.Native-Test.example:8443',
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ x: 3 }),
      });
      const text = await res.body.text();
      expect(res.statusCode, text).toBe(200);
      expect(JSON.parse(text)).toEqual({ app: 'shop', method: 'POST', path: `/v4/${P}/hello/echo` });
      expect(await handoffs()).toContain('domain 1');
    });

    it('a pre-dispatch refusal is Node’s answer, through the data plane', async () => {
      const res = await request(`http://127.0.0.1:${port}/v4/${P}/nope/echo`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: '{}',
      });
      expect(res.statusCode).toBe(404);
      expect(((await res.body.json()) as { error: { code: string } }).error.code).toBe('not_found');
    });

    const HELLO = { project: P, app: 'hello', mode: 'sync' };
    const served = (text: string) => ({
      requests: sample(text, 'apphost_gateway_requests_total', { ...HELLO, status: '200' }),
      durations: sample(text, 'apphost_gateway_request_duration_seconds_count', HELLO),
    });
    const dataPlanePid = () =>
      Number(/"pid":(\d+)[^\n]*"data plane started"/.exec(readFileSync(logFile, 'utf8'))?.[1]);

    it('/metrics counts the calls the data plane served, under the labels node mode uses, beside its own cpu and memory', async () => {
      const before = served(await metrics());
      const handedOff = await handoffs();
      for (let i = 0; i < 3; i++) {
        const res = await call({ n: i });
        expect(res.statusCode).toBe(200);
        await res.body.dump();
      }
      // Served in Rust (no hand-off), counted in Node's /metrics as Node counts its own.
      expect(await handoffs()).toEqual(handedOff);
      const text = await metrics();
      expect(served(text)).toEqual({ requests: before.requests + 3, durations: before.durations + 3 });
      expect(text).toMatch(
        new RegExp(
          `apphost_gateway_request_duration_seconds_bucket\\{le="0.005",project="${P}",app="hello",mode="sync"\\} \\d+`,
        ),
      );
      // The data plane's process, apart from Node's own process_* series (which stay, start time included).
      expect(sample(text, 'apphost_gateway_dataplane_resident_memory_bytes')).toBeGreaterThan(1024 * 1024);
      expect(text).toMatch(/^apphost_gateway_dataplane_cpu_seconds_total \d/m);
      expect(text).toMatch(/^process_start_time_seconds \d/m);
      expect(text).toMatch(/^process_resident_memory_bytes \d/m);
    });

    it('the calls the data plane serves reach the autoscaler as reporter <reporter>-dp and the runs API as records', async () => {
      const nc = await connect({ servers: nats.url });
      const reports: LoadReport[] = [];
      const sub = nc.subscribe(LOAD_SUBJECTS, {
        callback: (_, m) => void reports.push(m.json<LoadReport>()),
      });
      try {
        const handedOff = await handoffs();
        // Two calls held by the app for a while, and one answered at once.
        const held = [0, 1].map(() => call({ seconds: 1 }, 'sleep'));
        const quick = await call({ q: 1 });
        await quick.body.dump();
        const id = String(quick.headers['x-request-id']);
        for (const res of await Promise.all(held)) {
          expect(res.statusCode).toBe(200);
          await res.body.dump();
        }
        expect(await handoffs(), 'served in Rust').toEqual(handedOff);
        // serve.ts passes the data plane's load to its reporter's publish: a second reporter, `<id>-dp`.
        const busy = (r: LoadReport) => r.apps.some((a) => a.appName === 'hello' && a.concurrency > 0);
        await waitFor(
          'a -dp report with the calls',
          async () => reports.some((r) => r.reporter.endsWith('-dp') && busy(r)),
          10_000,
        );
        const dp = reports.find((r) => r.reporter.endsWith('-dp') && busy(r)) as LoadReport;
        expect(reports.map((r) => r.reporter)).toContain(dp.reporter.slice(0, -'-dp'.length));
        // And the gateway's recorder publishes the data plane's record of the quick call.
        const reader = createSyncCallReader(nc, { timeoutMs: 5_000 });
        let record: RunRecord | undefined;
        await waitFor(
          'its sync-call record',
          async () => {
            record = await reader.get(P, 'hello', id);
            return record !== undefined;
          },
          10_000,
        );
        expect(record).toMatchObject({
          mode: 'sync',
          runId: id,
          path: 'echo',
          state: 'success',
          responseStatus: 200,
        });
      } finally {
        sub.unsubscribe();
        await nc.close();
      }
    });

    it('a scrape while the data plane is stopped (SIGSTOP) answers within PROCESS_ANSWER_TIMEOUT_MS and lowers no counter (its last answer kept)', async () => {
      const running = served(await metrics());
      const pid = dataPlanePid();
      expect(pid).toBeGreaterThan(0);
      process.kill(pid, 'SIGSTOP');
      let text: string;
      let waited: number;
      try {
        const t0 = Date.now();
        const res = await fetch(`http://127.0.0.1:${opsPort}/metrics`);
        text = await res.text();
        waited = Date.now() - t0;
        expect(res.status).toBe(200);
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      expect(waited).toBeLessThan(PROCESS_ANSWER_TIMEOUT_MS + 1_000);
      // The data plane's counters as it last answered (a dip would read as a counter reset in
      // Prometheus); the process series are read from /proc, stopped or not.
      expect(served(text)).toEqual(running);
      expect(sample(text, 'apphost_gateway_dataplane_resident_memory_bytes')).toBeGreaterThan(0);
      await waitFor('ready again', async () => (await readyz()).status === 200, 5_000, 50);
      expect(served(await metrics())).toEqual(running);
    });

    it('a killed data plane: /readyz 503 naming it at once, the port refuses, then a new one serves', async () => {
      const pid = dataPlanePid();
      expect(pid).toBeGreaterThan(0);
      process.kill(pid, 'SIGKILL');
      await waitFor('readyz 503', async () => (await readyz()).status === 503, 1_000, 20);
      expect((await readyz()).body.failing).toContain('data plane');
      await expect(call({})).rejects.toThrow();
      await waitFor('ready again', async () => (await readyz()).status === 200, 10_000, 50);
      const res = await call({ again: true });
      expect(res.statusCode).toBe(200);
      await res.body.dump();
      expect(await metrics()).toMatch(/apphost_gateway_dataplane_restarts_total 1/);
    });

    it('SIGTERM: the data plane drains and exits, the gateway exits 0', async () => {
      const t0 = Date.now();
      child.kill('SIGTERM');
      const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
      expect(code).toBe(0);
      const log = readFileSync(logFile, 'utf8');
      expect(log).toMatch(/"drained":true[^\n]*"data plane exited"|"data plane exited"[^\n]*"drained":true/);
      expect(Date.now() - t0).toBeLessThan(15_000);
      await expect(call({})).rejects.toThrow();
    });
  },
);
