/**
 * Connection hand-over in native mode (docs/design/native-data-plane.md §3a), with the real data plane
 * binary, Node 24's real child_process IPC channel, real NATS and the real runtime: a connection whose
 * first call is async is handed to Node whole (the data plane writes Node's own `NODE_HANDLE` line with
 * the descriptor; if Node's wire format changed, these calls would not be answered), and all its later
 * calls are Node's, not handed off per call; a connection whose first call is sync stays the data
 * plane's, which hands its async calls off one by one; SIGTERM answers a handed connection's next call
 * with `Connection: close` and the gateway exits within its bound.
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Client } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { freePort } from '../../harness/process.ts';
import { buildDataPlane, noCargo, spawnNativeGateway } from './dataplane-binary.ts';
import { type Runtime, resolvedApp, startRuntime, tempDir } from './helpers.ts';

const P = 'proj-handover';
const START_TIMEOUT_MS = 60_000;
/** The gateway's bound here: handover 300 ms + drain 3 s + the rest of its shutdown, with room. */
const EXIT_BOUND_MS = 15_000;
const skip = noCargo();

describe.skipIf(!!skip)(
  `native mode: a connection whose first call is Node's is handed to Node whole${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    const dir = tempDir('apphost-handover-');
    let nats: NatsServer;
    let runtime: Runtime;
    let child: ChildProcess;
    let port: number;
    let opsPort: number;
    let token: string;
    const logFile = join(dir, 'gateway.log');
    const clients: Client[] = [];

    beforeAll(async () => {
      const bin = buildDataPlane();
      [nats, runtime, port, opsPort] = await Promise.all([
        startNats(),
        startRuntime(),
        freePort(),
        freePort(),
      ]);
      ({ child, token } = await spawnNativeGateway({
        dir,
        bin,
        natsUrl: nats.url,
        port,
        opsPort,
        projectId: P,
        platformKey: 'handover-test-platform-key-0123',
        apps: [resolvedApp(P, 'hello', runtime.url)],
        logFile,
        startTimeoutMs: START_TIMEOUT_MS,
      }));
    });

    afterAll(async () => {
      await Promise.all(clients.map((c) => c.destroy()));
      if (child?.exitCode === null) child.kill('SIGKILL');
      await runtime?.proc.stop(5_000);
      await nats?.stop();
    });

    /** One kept-alive connection (undici's Client), and how many times it connected. */
    const connection = (extraHeaders: Record<string, string> = {}) => {
      const client = new Client(`http://127.0.0.1:${port}`, { pipelining: 1 });
      clients.push(client);
      let connects = 0;
      let closedAt: number | undefined;
      client.on('connect', () => {
        connects += 1;
      });
      client.on('disconnect', () => {
        closedAt ??= Date.now();
      });
      const call = async (query: string, body: unknown = { x: 1 }, fn = 'echo') => {
        const res = await client.request({
          path: `/v4/${P}/hello/${fn}${query}`,
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...extraHeaders },
          body: JSON.stringify(body),
        });
        const text = await res.body.text();
        return { status: res.statusCode, headers: res.headers, text };
      };
      return { call, connects: () => connects, closedAt: () => closedAt };
    };
    const metrics = async () => (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
    const counter = (text: string, series: string) => {
      const m = text.match(new RegExp(`^${series.replace(/[{}"]/g, (c) => `\\${c}`)} (\\d+)`, 'm'));
      return m ? Number(m[1]) : 0;
    };
    const asyncHandoffs = async () =>
      counter(await metrics(), 'apphost_gateway_dataplane_handoffs_total{reason="async"}');
    const handedOver = async () =>
      counter(await metrics(), 'apphost_gateway_dataplane_connections_handed_over_total');

    it('a kept-alive connection whose first call is async: its 202s and later sync call are answered by Node, none handed off per call', async () => {
      const before = { handoffs: await asyncHandoffs(), handed: await handedOver() };
      const c = connection();
      for (let i = 0; i < 3; i++) {
        const r = await c.call('?async=true', { n: i });
        expect(r.status, r.text).toBe(202);
        expect(JSON.parse(r.text)).toMatchObject({ run_id: expect.any(String) });
      }
      const sync = await c.call('', { y: 2 });
      expect(sync.status, sync.text).toBe(200);
      expect(JSON.parse(sync.text)).toEqual({ echo: { y: 2 } });
      expect(sync.headers['x-request-id']).toEqual(expect.any(String));
      expect(c.connects()).toBe(1);
      expect(await handedOver()).toBe(before.handed + 1);
      // Served by Node directly: the data plane handed none of them off per call.
      expect(await asyncHandoffs()).toBe(before.handoffs);
    });

    it('a handed connection never honours the hand-off marker: a caller’s X-Apphost-Handoff neither sets the request id nor is refused', async () => {
      const forged = '0f0e0d0c-0b0a-4908-8706-050403020100';
      const c = connection({ 'x-apphost-handoff': `v=1; id=${forged}; start=1; reason=token_miss` });
      const before = await handedOver();
      const accepted = await c.call('?async=true');
      expect(accepted.status, accepted.text).toBe(202);
      expect(await handedOver()).toBe(before + 1);
      const sync = await c.call('', { y: 4 });
      expect(sync.status, sync.text).toBe(200);
      for (const r of [accepted, sync]) {
        expect(r.headers['x-request-id']).toEqual(expect.any(String));
        expect(r.headers['x-request-id']).not.toBe(forged);
      }
    });

    it('a connection whose first call is sync stays the data plane’s: its async calls are handed off per call', async () => {
      const before = { handoffs: await asyncHandoffs(), handed: await handedOver() };
      const c = connection();
      const sync = await c.call('', { y: 1 });
      expect(sync.status, sync.text).toBe(200);
      for (let i = 0; i < 2; i++) expect((await c.call('?async=true')).status).toBe(202);
      expect(c.connects()).toBe(1);
      expect(await asyncHandoffs()).toBe(before.handoffs + 2);
      expect(await handedOver()).toBe(before.handed);
    });

    it('a proxy’s connection (X-Forwarded-For) that opens with an async call stays the data plane’s: a proxy pools it for many callers', async () => {
      const before = { handoffs: await asyncHandoffs(), handed: await handedOver() };
      const c = connection({ 'x-forwarded-for': '203.0.113.7' });
      for (let i = 0; i < 2; i++) expect((await c.call('?async=true')).status).toBe(202);
      const sync = await c.call('', { y: 3 });
      expect(sync.status, sync.text).toBe(200);
      expect(JSON.parse(sync.text)).toEqual({ echo: { y: 3 } });
      expect(c.connects()).toBe(1);
      expect(await handedOver()).toBe(before.handed);
      expect(await asyncHandoffs()).toBe(before.handoffs + 2);
    });

    it('SIGTERM with a handed connection open: its next answer says Connection: close, an idle one is closed when the drain starts (node mode’s closeIdleConnections, not at exit), and the gateway exits 0 within its bound', async () => {
      const c = connection();
      expect((await c.call('?async=true')).status).toBe(202);
      const idle = connection();
      expect((await idle.call('?async=true')).status).toBe(202);
      // A sync call on the data plane's own connection keeps the drain (and the process) busy for 2 s.
      const busy = connection();
      expect((await busy.call('', { y: 0 })).status).toBe(200);
      const slow = busy.call('', { seconds: 2 }, 'sleep').then((r) => ({ ...r, at: Date.now() }));
      await new Promise((r) => setTimeout(r, 200));
      const t0 = Date.now();
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      // Within the handover period (300 ms): still served, told to close.
      await new Promise((r) => setTimeout(r, 100));
      const next = await c.call('?async=true');
      expect(next.status, next.text).toBe(202);
      expect(next.headers.connection).toBe('close');
      const answered = await slow;
      expect(answered.status, answered.text).toBe(200);
      // node:http tracks the handed connections (handed.sock's listening): the idle one went at the drain's
      // start, while the slow call still ran.
      expect(idle.closedAt(), 'the idle handed connection closed').toBeDefined();
      expect(idle.closedAt()).toBeLessThan(answered.at - 500);
      expect(await exited).toBe(0);
      expect(Date.now() - t0).toBeLessThan(EXIT_BOUND_MS);
    });
  },
);
