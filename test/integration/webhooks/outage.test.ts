/**
 * A NATS outage under a running dispatcher (real child process): /readyz reports it, the pull loop
 * recovers on its own after NATS is back, and a job that was between attempts is still delivered.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../harness/process.ts';
import {
  type Child,
  makeJob,
  publish,
  type Receiver,
  startDispatcherProcess,
  startReceiver,
  startWebhookNats,
  type WebhookNats,
  waitForFinal,
} from './helpers.ts';

const logDir = mkdtempSync(join(tmpdir(), 'apphost-webhook-outage-'));
const children: ChildProcess[] = [];
let nats: WebhookNats;
let child: Child;
let receiver: Receiver;

beforeAll(async () => {
  nats = await startWebhookNats();
  receiver = await startReceiver((n) => ({ status: n === 1 ? 404 : 200 }));
  child = await startDispatcherProcess({
    name: 'outage',
    natsUrl: nats.server.url,
    platformKey: 'outage-test-platform-key-0123',
    logDir,
    children,
    // A long retry delay, so the outage surely falls between attempts 1 and 2.
    env: { APPHOST_WEBHOOK_RETRY_DELAY_MS: '5000' },
  });
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await receiver?.close();
  await nats?.close();
  if (!process.env.APPHOST_TEST_KEEP_DIRS) rmSync(logDir, { recursive: true, force: true });
});

const ready = async () => (await fetch(`http://127.0.0.1:${child.opsPort}/readyz`)).status;

describe('NATS outage', () => {
  it('reports not ready while NATS is down, then resumes and loses nothing', async () => {
    const job = makeJob({ endpoint: receiver.url });
    await publish(nats.js, job);
    await waitFor(
      'attempt 1 recorded',
      async () => (await nats.record(job.requestId))?.attempts[0]?.outcome === 'http_retryable',
      30_000,
      20,
    );

    await nats.server.stop({ keepStore: true });
    await waitFor('/readyz 503 during the outage', async () => (await ready()) === 503, 30_000);
    await nats.server.restart();
    await waitFor('/readyz 200 after the outage', async () => (await ready()) === 200, 60_000);

    const rec = await waitForFinal(nats, job.requestId, 60_000);
    expect(rec.state).toBe('delivered');
    expect(rec.attempts.map((a) => a.status)).toEqual([404, 200]);
    expect(receiver.received).toHaveLength(2);

    // New work after the outage is picked up by the same process.
    const after = makeJob({ endpoint: receiver.url });
    await waitFor(
      'publish after the outage',
      async () => {
        await publish(nats.js, after);
        return true;
      },
      30_000,
      500,
    );
    expect((await waitForFinal(nats, after.requestId, 60_000)).state).toBe('delivered');
  });
});
