/**
 * The logs route over local mode's log source (the real one `apphost dev` uses): read, follow as
 * server-sent events, a follow that ends when its client goes away, and the server's own bound on it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAppLogs } from '../../../src/local/app-logs.ts';
import { createServiceAccount } from '../../../src/management/service-accounts.ts';
import { createMemoryStore } from '../../../src/management/store/memory.ts';
import { waitFor } from '../../harness/process.ts';
import { memoryDeliveries, memoryRuns } from './fixtures.ts';
import { type RunningApi, startApi } from './server.ts';

const WAIT_MS = 10_000;
const logs = createAppLogs('alpha', { linesPerApp: 5, maxQueuedLines: 100 });
let api: RunningApi;
let shortApi: RunningApi;
let token: string;

beforeAll(async () => {
  const store = createMemoryStore({ projects: { alpha: ['hello', 'quiet'] } });
  token = (await createServiceAccount(store, 'alpha', 'admin', new Date(Date.now() + 3600_000))).token;
  const deps = { store, runs: memoryRuns(), deliveries: memoryDeliveries(), logs };
  api = await startApi(deps);
  shortApi = await startApi({ ...deps, settings: { logsFollowMaxMs: 300, logsHeartbeatMs: 100 } });
});
afterAll(async () => {
  await api?.close();
  await shortApi?.close();
});

const get = (base: string, path: string, signal?: AbortSignal) =>
  fetch(`${base}/v2/projects/alpha/apps/${path}`, {
    headers: { authorization: `Bearer ${token}` },
    ...(signal ? { signal } : {}),
  });

describe('GET …/apps/{app}/logs', () => {
  it('returns the kept lines oldest first, each with its replica and the request id the runtime logged', async () => {
    for (let i = 0; i < 7; i++)
      logs.add('hello', 42, 'stdout', JSON.stringify({ msg: 'call', request_id: `r${i}` }));
    logs.add('hello', 42, 'stderr', 'Traceback (plain text)');
    const res = await get(api.url, 'hello/logs');
    expect(res.status).toBe(200);
    const { lines } = (await res.json()) as { lines: Array<Record<string, string>> };
    // The ring keeps 5 lines per app: the oldest are gone, and that is all that is gone.
    expect(lines.map((l) => l.request_id)).toEqual(['r3', 'r4', 'r5', 'r6', undefined]);
    expect(lines[4]).toMatchObject({
      replica: 'local-42',
      stream: 'stderr',
      message: 'Traceback (plain text)',
    });
    expect(lines[0]?.time).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    const tail = (await (await get(api.url, 'hello/logs?tail=2')).json()) as { lines: unknown[] };
    expect(tail.lines).toHaveLength(2);
  });

  it('answers 400 for a bad since and 404 for an app that does not exist', async () => {
    const bad = await get(api.url, 'hello/logs?since=yesterday');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('bad_request');
    expect((await get(api.url, 'nope/logs')).status).toBe(404);
  });

  it('follows: new lines arrive as events, and the follow ends when the client goes away', async () => {
    const abort = new AbortController();
    const res = await get(api.url, 'quiet/logs?follow=true', abort.signal);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await waitFor('the follower', async () => logs.followers('quiet') === 1, WAIT_MS);
    logs.add('quiet', 7, 'stdout', 'first');
    let text = '';
    while (!text.includes('"message":"first"')) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`stream ended early: ${text}`);
      text += new TextDecoder().decode(value);
    }
    expect(text).toMatch(
      /^event: log\ndata: \{"time":"[^"]+","replica":"local-7","stream":"stdout","message":"first"\}/m,
    );
    abort.abort();
    await waitFor('the follow to end on the server', async () => logs.followers('quiet') === 0, WAIT_MS);
  });

  it('ends a follow at logsFollowMaxMs with an end event saying why', async () => {
    const res = await get(shortApi.url, 'quiet/logs?follow=1');
    const text = await res.text();
    expect(text).toMatch(/event: end\ndata: \{"reason":"max_duration"\}\n\n$/);
    expect(logs.followers('quiet')).toBe(0);
  });
});
