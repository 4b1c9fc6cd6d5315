/**
 * The dispatcher as a real child process (its main.ts), killed with SIGKILL between attempts and during
 * an attempt: a fresh dispatcher finishes the job, nothing is lost and there are never more than 3
 * attempts. Uses the real default retry delay. Also checks /metrics and /readyz on the ops port.
 */
import type { ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { INTERRUPTED_ATTEMPT } from '../../../src/webhooks/dispatcher.ts';
import { DEFAULT_WEBHOOK_SETTINGS } from '../../../src/webhooks/settings.ts';
import { WEBHOOKS_ACK_WAIT_MS } from '../../../src/webhooks/stream.ts';
import { waitFor } from '../../harness/process.ts';
import {
  type Child,
  gaps,
  kill,
  makeJob,
  publish,
  type Received,
  type Receiver,
  sleep,
  startDispatcherProcess,
  startReceiver,
  startWebhookNats,
  type WebhookNats,
  waitForFinal,
} from './helpers.ts';

const PLATFORM_KEY = 'crash-test-platform-key-0123456789';
const SECRET = 'crash-test-signing-secret';
const secretBox = createSecretBox(PLATFORM_KEY);
const logDir = mkdtempSync(join(tmpdir(), 'apphost-webhook-crash-'));
let nats: WebhookNats;
const children: ChildProcess[] = [];
const receivers: Receiver[] = [];

const startDispatcher = (name: string) =>
  startDispatcherProcess({ name, natsUrl: nats.server.url, platformKey: PLATFORM_KEY, logDir, children });

const signatureOk = (r: Received) =>
  r.headers['x-service-webhook-signature'] ===
  `v1,${createHmac('sha256', SECRET)
    .update(
      `${r.headers['x-request-id']}.${r.headers['x-service-webhook-timestamp']}.${r.body.toString('utf8')}`,
    )
    .digest('hex')}`;

beforeAll(async () => {
  nats = await startWebhookNats();
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await Promise.all(receivers.map((r) => r.close()));
  await nats?.close();
  if (!process.env.APPHOST_TEST_KEEP_DIRS) rmSync(logDir, { recursive: true, force: true });
});

describe('dispatcher crashes', () => {
  let survivor: Child | undefined;

  it('SIGKILL between attempts: a new dispatcher makes the remaining attempts, 3 in total', async () => {
    const r = await startReceiver(() => ({ status: 404 }));
    receivers.push(r);
    const first = await startDispatcher('first');
    const job = makeJob({ endpoint: r.url, secret: SECRET, secretBox });
    await publish(nats.js, job);

    await waitFor(
      'attempt 1 recorded',
      async () => (await nats.record(job.requestId))?.attempts[0]?.outcome === 'http_retryable',
      30_000,
      20,
    );
    await kill(first);
    expect(r.received).toHaveLength(1);

    const second = await startDispatcher('second');
    survivor = second;
    const rec = await waitForFinal(nats, job.requestId, 60_000);
    await sleep(DEFAULT_WEBHOOK_SETTINGS.retryDelayMs + 1_000);

    expect(rec.state).toBe('failed');
    expect(rec.attempts.map((a) => [a.attempt, a.outcome, a.status])).toEqual([
      [1, 'http_retryable', 404],
      [2, 'http_retryable', 404],
      [3, 'http_retryable', 404],
    ]);
    expect(r.received).toHaveLength(3);
    expect(r.received.every(signatureOk)).toBe(true);
    expect(new Set(r.received.map((x) => x.headers['x-request-id']))).toEqual(new Set([job.requestId]));
    // Between attempts 2 and 3 (same live dispatcher, the real default delay): within the spec's 5 s.
    const [, gap23] = gaps(r.received) as [number, number];
    expect(gap23).toBeGreaterThanOrEqual(DEFAULT_WEBHOOK_SETTINGS.retryDelayMs - 100);
    expect(gap23).toBeLessThanOrEqual(5_000 + 1_000);

    // The final error names the request and host, each attempt's outcome, and never the secret or body.
    const log = readFileSync(second.logFile, 'utf8');
    const line = log.split('\n').find((l) => l.includes('webhook delivery failed'));
    expect(line).toBeDefined();
    const entry = JSON.parse(line as string);
    expect(entry).toMatchObject({ level: 50, requestId: job.requestId, endpointHost: '127.0.0.1' });
    expect(entry.attempts).toHaveLength(3);
    for (const f of ['first', 'second']) {
      const text = readFileSync(join(logDir, `${f}.log`), 'utf8');
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain('hello');
    }

    const metrics = await (await fetch(`http://127.0.0.1:${second.opsPort}/metrics`)).text();
    expect(metrics).toMatch(/apphost_webhook_attempts_total\{outcome="http_retryable"\} 2\b/);
    expect(metrics).toMatch(/apphost_webhook_deliveries_total\{result="failed"\} 1\b/);
    expect(metrics).toMatch(/apphost_webhook_delivery_duration_seconds_count 1\b/);
  });

  it('SIGKILL during an attempt: the job is redelivered, the cut attempt still counts', async () => {
    const r = await startReceiver((n) => (n === 1 ? 'hang' : { status: 200 }));
    receivers.push(r);
    const victim = survivor ?? (await startDispatcher('victim'));
    const job = makeJob({ endpoint: r.url });
    await publish(nats.js, job);
    await waitFor('attempt 1 to reach the receiver', async () => r.received.length === 1, 30_000, 20);
    await kill(victim);

    const next = await startDispatcher('next');
    const rec = await waitForFinal(nats, job.requestId, 60_000);
    expect(rec.state).toBe('delivered');
    expect(rec.attempts.map((a) => [a.attempt, a.outcome, a.error])).toEqual([
      [1, 'network_error', INTERRUPTED_ATTEMPT],
      [2, 'success', undefined],
    ]);
    expect(r.received).toHaveLength(2);

    const metrics = await (await fetch(`http://127.0.0.1:${next.opsPort}/metrics`)).text();
    expect(metrics).toMatch(/apphost_webhook_attempts_total\{outcome="success"\} 1\b/);
    expect(metrics).toMatch(/apphost_webhook_deliveries_total\{result="delivered"\} 1\b/);
    survivor = next;
  });

  it('an attempt longer than the ack wait is not handed out twice (heartbeats)', async () => {
    const next = survivor ?? (await startDispatcher('next'));
    // Longer than the 5 s ack wait, shorter than the default 10 s attempt timeout.
    const r = await startReceiver(() => ({ status: 200, delayMs: WEBHOOKS_ACK_WAIT_MS + 1_500 }));
    receivers.push(r);
    const job = makeJob({ endpoint: r.url });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId, 60_000);
    expect(rec.state).toBe('delivered');
    expect(rec.attempts).toHaveLength(1);
    await sleep(1_000);
    expect(r.received).toHaveLength(1);

    survivor = next;
  });

  it('SIGTERM during an attempt: the attempt is finished, then a clean exit', async () => {
    const next = survivor ?? (await startDispatcher('last'));
    const r = await startReceiver(() => ({ status: 200, delayMs: 1_500 }));
    receivers.push(r);
    const job = makeJob({ endpoint: r.url });
    await publish(nats.js, job);
    await waitFor('the attempt to reach the receiver', async () => r.received.length === 1, 30_000, 20);

    const exited = new Promise<number | null>((res) => next.proc.once('exit', (code) => res(code)));
    next.proc.kill('SIGTERM');
    await waitFor(
      '/readyz to stop answering 200',
      async () =>
        (await fetch(`http://127.0.0.1:${next.opsPort}/readyz`).catch(() => undefined))?.status !== 200,
      10_000,
      20,
    );
    expect(await exited).toBe(0);
    const rec = await nats.record(job.requestId);
    expect(rec?.state).toBe('delivered');
    expect(rec?.attempts.map((a) => a.outcome)).toEqual(['success']);
    expect(r.received).toHaveLength(1);
  });
});
