/**
 * The dashboard's run results, sync calls and live log tail over HTTP, on the real parts: the run store
 * and the SYNC_CALLS stream on a private NATS JetStream server (records written as the run worker and
 * the gateway write them), and local mode's log source fed like an app process feeds it.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAppLogs } from '../../../src/local/app-logs.ts';
import { withSyncCalls } from '../../../src/management/run-reader.ts';
import { createServiceAccount } from '../../../src/management/service-accounts.ts';
import { createMemoryStore, type MemoryStore } from '../../../src/management/store/memory.ts';
import { ensureSyncCallsStream } from '../../../src/runs/infrastructure.ts';
import { createRunStore, ensureRunsInfrastructure, type RunStore } from '../../../src/runs/store.ts';
import { createSyncCallReader } from '../../../src/runs/sync-call-reader.ts';
import { createSyncCallRecorder } from '../../../src/runs/sync-calls.ts';
import type { RunRecord } from '../../../src/shared/contracts/messaging.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { waitFor } from '../../harness/process.ts';
import { memoryDeliveries } from '../management/fixtures.ts';
import { Browser, type DashboardServer, startDashboard } from './server.ts';

const FAR = new Date(Date.now() + 300 * 86_400_000);
/** Bound on an event arriving on a live tail, or a record reaching the stream (a busy machine). */
const WAIT_MS = 20_000;
const SESSION_CHECK_MS = 200;

describe('dashboard: results, sync calls and the live log tail', () => {
  let nats: NatsServer;
  let nc: NatsConnection;
  let runs: RunStore;
  let store: MemoryStore;
  let server: DashboardServer;
  let token: string;
  const logs = createAppLogs('proj');
  const now = Date.now();
  const at = (s: number) => new Date(now - 600_000 + s * 1000).toISOString();

  const finished = (runId: string, s: number, over: Partial<RunRecord>): RunRecord => ({
    runId,
    projectId: 'proj',
    appName: 'hello',
    path: 'predict',
    state: 'success',
    createdAt: at(s),
    startedAt: at(s),
    finishedAt: at(s + 1),
    executions: 1,
    responseStatus: 200,
    ...over,
  });

  /** Writes a finished run as the run worker does: the kept bytes first, then the record. */
  async function put(r: RunRecord, bytes?: string | Uint8Array) {
    if (bytes !== undefined)
      await runs.putResult(
        r.projectId,
        r.appName,
        r.runId,
        typeof bytes === 'string' ? Buffer.from(bytes) : bytes,
      );
    await runs.update(r.projectId, r.appName, r.runId, () => r);
  }

  beforeAll(async () => {
    nats = await startNats();
    nc = await connect({ servers: nats.url });
    const jsm = await jetstreamManager(nc);
    runs = createRunStore(await ensureRunsInfrastructure(jsm), nc);
    await ensureSyncCallsStream(jsm);
    store = createMemoryStore({ projects: { proj: ['hello', 'slow'], other: ['hello'] } });
    token = (await createServiceAccount(store, 'proj', 'admin', FAR)).token;

    const json = JSON.stringify({ answer: 42, items: ['a', 'b'] });
    await put(
      finished('r-json', 1, {
        result: {
          kept: 'complete',
          contentType: 'application/json',
          sizeBytes: json.length,
          keptBytes: json.length,
        },
      }),
      json,
    );
    const text = 'x'.repeat(300);
    await put(
      finished('r-cut', 2, {
        result: { kept: 'truncated', contentType: 'text/plain', sizeBytes: 900_000, keptBytes: text.length },
      }),
      text,
    );
    await put(
      finished('r-drop', 3, {
        result: {
          kept: 'dropped',
          contentType: 'image/png',
          sizeBytes: 400_000,
          keptBytes: 0,
          reason: 'a non-text response over the bound',
        },
      }),
    );
    const events = 'data: {"i": 0}\n\ndata: {"i": 1}\n\n';
    await put(
      finished('r-sse', 4, {
        streamed: true,
        result: {
          kept: 'complete',
          contentType: 'text/event-stream',
          sizeBytes: events.length,
          keptBytes: events.length,
        },
      }),
      events,
    );
    await put(
      finished('r-html', 5, {
        result: { kept: 'complete', contentType: 'text/html', sizeBytes: 30, keptBytes: 30 },
      }),
      '<script>alert("x")</script>',
    );
    await put({ ...finished('r-theirs', 6, {}), projectId: 'other' }, '{"secret": "theirs"}');
    // Two sync calls, recorded as the gateway records them (core NATS, nobody waits).
    const recorder = createSyncCallRecorder({
      publish: (subject, data) => nc.publish(subject, data),
      settings: { perAppPerSecond: 100, perSecond: 100 },
    });
    for (const [id, status, s] of [
      ['s-ok', 200, 7],
      ['s-fail', 500, 8],
    ] as const)
      recorder.record({
        requestId: id,
        projectId: 'proj',
        appName: 'hello',
        path: 'predict',
        status,
        startedAtMs: Date.parse(at(s)),
        finishedAtMs: Date.parse(at(s)) + 20,
        aborted: false,
        streamed: false,
      });
    await nc.flush();
    const reader = createSyncCallReader(nc, { timeoutMs: 10_000 });
    await waitFor(
      'sync records stored',
      async () => (await reader.list('proj', 'hello', {})).length === 2,
      WAIT_MS,
    );

    logs.add('hello', 101, 'stdout', 'first line', now - 2000);
    logs.add('hello', 101, 'stderr', '<b>not markup</b>', now - 1000);
    server = await startDashboard({
      natsUrl: nats.url,
      store,
      runs: withSyncCalls(runs, reader),
      deliveries: memoryDeliveries(),
      logs,
      settings: { logTailSessionCheckMs: SESSION_CHECK_MS, logTailLines: 50 },
    });
  });

  afterAll(async () => {
    await server?.close();
    await nc?.close();
    await nats?.stop();
  });

  const signedIn = async (t = token) => {
    const b = new Browser(server.url);
    expect((await b.signIn(t)).status).toBe(303);
    return b;
  };
  const row = (html: string, runId: string) =>
    new RegExp(`<tr data-run="${runId}"[\\s\\S]*?</tr>`).exec(html)?.[0] ?? '';

  describe('results', () => {
    it("shows a run's JSON result pretty-printed on its page", async () => {
      const b = await signedIn();
      const r = await b.get('/dashboard/runs/hello/r-json');
      expect(r.status).toBe(200);
      expect(r.text).toContain('application/json · 31 B');
      expect(r.text).toContain('{\n  &quot;answer&quot;: 42,\n  &quot;items&quot;: [\n    &quot;a&quot;,');
    });

    it.each([
      ['r-cut', 'truncated', /truncated: the first 300 B of 879 KiB are kept/],
      ['r-drop', 'dropped', /dropped: none of the 391 KiB is kept \(a non-text response over the bound\)/],
      ['r-sse', 'streamed', /streamed: the function answered text\/event-stream/],
    ])('marks %s as %s in words on its page and in its table row', async (runId, mark, words) => {
      const b = await signedIn();
      const page = await b.get(`/dashboard/runs/hello/${runId}`);
      expect(page.text).toMatch(new RegExp(`data-mark="${mark}">[^<]*`));
      expect(page.text).toMatch(words);
      const table = await b.get('/dashboard/runs?app=hello');
      expect(row(table.text, runId)).toContain(`data-mark="${mark}"`);
    });

    it('lists results by their metadata and loads a body only when its row is opened', async () => {
      const b = await signedIn();
      const table = await b.get('/dashboard/runs?app=hello');
      const r = row(table.text, 'r-json');
      expect(r).toContain('application/json · 31 B');
      expect(r).not.toContain('answer');
      expect(r).toContain('hx-get="/dashboard/runs/hello/r-json/result"');
      expect(r).toContain('hx-preserve');
      // Nothing kept, nothing to load.
      expect(row(table.text, 'r-drop')).not.toContain('hx-get');
      const body = await b.get('/dashboard/runs/hello/r-json/result', { 'hx-request': 'true' });
      expect(body.status).toBe(200);
      expect(body.text).toContain('&quot;answer&quot;: 42');
      expect(body.text).not.toContain('<html');
    });

    it('escapes a result that is markup', async () => {
      const b = await signedIn();
      const page = await b.get('/dashboard/runs/hello/r-html');
      expect(page.text).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
      expect(page.text).not.toContain('<script>alert');
    });

    it("shows no other project's result, nor a result's body without a session", async () => {
      const b = await signedIn();
      expect((await b.get('/dashboard/runs/hello/r-theirs')).status).toBe(404);
      expect((await b.get('/dashboard/runs/hello/r-theirs/result')).status).toBe(404);
      const anon = new Browser(server.url);
      const r = await anon.get('/dashboard/runs/hello/r-json/result');
      expect(r.status).toBe(303);
      expect(r.text).not.toContain('answer');
    });
  });

  describe('mode', () => {
    it('shows sync calls beside async runs, each with its mode, and filters by mode', async () => {
      const b = await signedIn();
      const all = await b.get('/dashboard/runs?app=hello');
      expect(row(all.text, 's-ok')).toMatch(/<span class="mode">sync<\/span>/);
      expect(row(all.text, 's-fail')).toMatch(/data-state="failure"/);
      expect(row(all.text, 'r-json')).toMatch(/<span class="mode">async<\/span>/);
      // A sync call keeps no result, and cannot be cancelled.
      expect(row(all.text, 's-ok')).toContain('Not kept for sync calls');
      expect(row(all.text, 's-ok')).not.toContain('/cancel');

      const sync = await b.get('/dashboard/runs?mode=sync');
      const ids = [...sync.text.matchAll(/<tr data-run="([^"]+)"/g)].map((m) => m[1]);
      expect(ids).toEqual(['s-fail', 's-ok']);
      const async_ = await b.get('/dashboard/runs?mode=async&app=hello');
      expect(async_.text).not.toContain('data-run="s-ok"');
      expect(async_.text).toContain('data-run="r-json"');
      const bad = await b.get('/dashboard/runs?mode=batch');
      expect(bad.text).toMatch(/unknown mode batch/);
    });

    it("opens a sync call's page", async () => {
      const b = await signedIn();
      const r = await b.get('/dashboard/runs/hello/s-fail');
      expect(r.status).toBe(200);
      expect(r.text).toMatch(/<dt>Mode<\/dt><dd><span class="mode">sync<\/span>/);
      expect(r.text).toContain('HTTP 500');
    });
  });

  describe('live log tail', () => {
    /** An SSE request with the session cookie; resolves once the response head is in. */
    function follow(b: Browser, path: string) {
      const events: Array<{ event: string; data: Record<string, unknown> }> = [];
      let buffer = '';
      let res: IncomingMessage | undefined;
      const u = new URL(server.url);
      const req = httpRequest({
        host: u.hostname,
        port: u.port,
        path,
        headers: {
          accept: 'text/event-stream',
          cookie: [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
        },
      });
      const head = new Promise<IncomingMessage>((resolve, reject) => {
        req.on('response', (r) => {
          res = r;
          r.setEncoding('utf8');
          r.on('data', (chunk: string) => {
            buffer += chunk;
            let i = buffer.indexOf('\n\n');
            while (i >= 0) {
              const block = buffer.slice(0, i);
              buffer = buffer.slice(i + 2);
              const event = /^event: (.*)$/m.exec(block)?.[1];
              const data = /^data: (.*)$/m.exec(block)?.[1];
              if (event && data) events.push({ event, data: JSON.parse(data) });
              i = buffer.indexOf('\n\n');
            }
          });
          resolve(r);
        });
        req.on('error', reject);
      });
      req.end();
      return { head, events, close: () => (res ? res.destroy() : req.destroy()) };
    }

    it('renders the last lines into the page (escaped), and the page follows its own stream', async () => {
      const b = await signedIn();
      const page = await b.get('/dashboard/apps/hello');
      expect(page.text).toMatch(/data-log-src="\/dashboard\/apps\/hello\/logs"/);
      expect(page.text).toContain('local-101 first line');
      expect(page.text).toContain('&lt;b&gt;not markup&lt;/b&gt;');
    });

    it('follows an app log as server-sent events through the dashboard, and stops when the page goes away', async () => {
      const b = await signedIn();
      const f = follow(b, '/dashboard/apps/hello/logs');
      const res = await f.head;
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['content-security-policy']).toMatch(/connect-src 'self'/);
      await waitFor('the tail lines', async () => f.events.length >= 2, WAIT_MS);
      expect(f.events[0]).toMatchObject({
        event: 'log',
        data: { message: 'first line', replica: 'local-101' },
      });
      expect(String(f.events[0]?.data.text)).toMatch(/^\d\d:\d\d:\d\d local-101 first line$/);
      expect(logs.followers('hello')).toBe(1);
      logs.add('hello', 102, 'stdout', 'a new line');
      await waitFor(
        'the new line',
        async () => f.events.some((e) => e.data.message === 'a new line'),
        WAIT_MS,
      );
      f.close();
      await waitFor('the follow ended on the server', async () => logs.followers('hello') === 0, WAIT_MS);
    });

    it('ends the tail with session_ended when its token is revoked meanwhile', async () => {
      const t = (await createServiceAccount(store, 'proj', 'tail', FAR)).token;
      const b = await signedIn(t);
      const f = follow(b, '/dashboard/apps/hello/logs');
      await f.head;
      await waitFor('the tail lines', async () => f.events.length >= 2, WAIT_MS);
      await store.revokeServiceAccount('proj', 'tail');
      await waitFor('the end event', async () => f.events.some((e) => e.event === 'end'), WAIT_MS);
      expect(f.events.at(-1)).toEqual({ event: 'end', data: { reason: 'session_ended' } });
      await waitFor('the follow ended on the server', async () => logs.followers('hello') === 0, WAIT_MS);
      f.close();
    });

    it("refuses a tail without a session, and another project's app", async () => {
      const anon = new Browser(server.url);
      const r = await anon.get('/dashboard/apps/hello/logs');
      expect(r.status).toBe(303);
      expect(r.location).toBe('/dashboard/sign-in');
      const b = await signedIn();
      expect((await b.get('/dashboard/apps/nope/logs')).status).toBe(404);
      expect(logs.followers('hello')).toBe(0);
    });
  });
});
