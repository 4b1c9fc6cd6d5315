/**
 * The dispatcher end to end against real NATS and real HTTP receivers: body and headers, signature
 * (checked by an independent implementation and by the documented Python and TypeScript snippets), and
 * one test per row of the spec's retry table.
 */
import { execFileSync } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEBHOOKS_STREAM } from '../../../src/shared/contracts/messaging.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { createDeliveryStore, DeliveryConflictError } from '../../../src/webhooks/deliveries.ts';
import { createWebhookDispatcher, type WebhookDispatcher } from '../../../src/webhooks/dispatcher.ts';
import { DEFAULT_WEBHOOK_SETTINGS } from '../../../src/webhooks/settings.ts';
import { systemResolveHost } from '../../../src/webhooks/ssrf.ts';
import { freePort, waitFor } from '../../harness/process.ts';
import {
  gaps,
  makeJob,
  publish,
  type Received,
  type Receiver,
  sleep,
  startReceiver,
  startWebhookNats,
  type WebhookNats,
  waitForFinal,
} from './helpers.ts';

const RETRY_DELAY_MS = 200;
const ATTEMPT_TIMEOUT_MS = 1_500;
/** The spec's bound between attempts. */
const MAX_GAP_MS = 5_000;

const secretBox = createSecretBox('test-platform-key-0123456789');
let nats: WebhookNats;
let dispatcher: WebhookDispatcher;
const registry = new Registry();
const receivers: Receiver[] = [];

const receiver = async (script: Parameters<typeof startReceiver>[0]) => {
  const r = await startReceiver(script);
  receivers.push(r);
  return r;
};

beforeAll(async () => {
  nats = await startWebhookNats();
  dispatcher = createWebhookDispatcher({
    nc: nats.nc,
    secretBox,
    log: silentLogger(),
    registry,
    settings: {
      ...DEFAULT_WEBHOOK_SETTINGS,
      allowCidrs: ['127.0.0.0/8'],
      retryDelayMs: RETRY_DELAY_MS,
      attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
      concurrency: 4,
      pullExpiresMs: 2_000,
    },
    deliveriesKv: nats.kv,
    // Names under .pinned.invalid exist only here: were the connection to look the name up again
    // (instead of using the checked address), it would fail.
    resolveHost: async (host) =>
      host.endsWith('.pinned.invalid') ? [{ address: '127.0.0.1', family: 4 }] : systemResolveHost(host),
  });
  await dispatcher.start();
});

afterAll(async () => {
  await dispatcher?.stop(10_000);
  await Promise.all(receivers.map((r) => r.close()));
  await nats?.close();
});

/** §6.3, written here with node:crypto independently of src/webhooks/signing.ts. */
function independentlyVerify(secret: string, r: Received): boolean {
  const sig = String(r.headers['x-service-webhook-signature']);
  if (!sig.startsWith('v1,')) return false;
  const content = `${r.headers['x-request-id']}.${r.headers['x-service-webhook-timestamp']}.${r.body.toString('utf8')}`;
  const want = createHmac('sha256', secret).update(content, 'utf8').digest('hex');
  const got = sig.slice(3);
  return /^[0-9a-f]{64}$/.test(got) && timingSafeEqual(Buffer.from(want), Buffer.from(got));
}

function docSnippet(lang: 'python' | 'ts'): string {
  const doc = readFileSync(new URL('../../../docs/webhooks.md', import.meta.url), 'utf8');
  const m = doc.match(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``));
  if (!m?.[1]) throw new Error(`no ${lang} snippet in docs/webhooks.md`);
  return m[1];
}

describe('delivery', () => {
  it('unsigned: POSTs the function body byte for byte with X-Request-Id, once', async () => {
    const r = await receiver(() => ({ status: 200 }));
    const body = '{"b":1,  "a": "é"}\n';
    const job = makeJob({ endpoint: `${r.url}?x=1`, body });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId);
    expect(rec.state).toBe('delivered');
    expect(rec.attempts).toHaveLength(1);
    expect(rec.attempts[0]).toMatchObject({ attempt: 1, outcome: 'success', status: 200 });
    expect(rec.endpointHost).toBe('127.0.0.1');
    expect(r.received).toHaveLength(1);
    const got = r.received[0] as Received;
    expect(got.method).toBe('POST');
    expect(got.url).toBe('/hook?x=1');
    expect(got.body.equals(Buffer.from(body))).toBe(true);
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['x-request-id']).toBe(job.requestId);
    expect(got.headers['user-agent']).toBe('apphost-webhooks/0.1');
    expect(got.headers['x-service-webhook-signature']).toBeUndefined();
    // Work-queue retention: a finished job leaves the stream.
    await sleep(200);
    expect((await nats.jsm.streams.info(WEBHOOKS_STREAM)).state.messages).toBe(0);
  });

  it('signed: the envelope verifies with an independent HMAC and with the documented snippets', async () => {
    const secret = 'whsec_test-ü-secret';
    const r = await receiver((n) => ({ status: n === 1 ? 404 : 204 }));
    const job = makeJob({ endpoint: r.url, body: '{"answer":42}', secret, secretBox });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId);
    expect(rec.state).toBe('delivered');
    expect(r.received).toHaveLength(2);
    for (const got of r.received) {
      expect(independentlyVerify(secret, got)).toBe(true);
      expect(independentlyVerify('wrong-secret', got)).toBe(false);
      const env = JSON.parse(got.body.toString('utf8'));
      expect(env).toEqual({
        run_id: job.requestId,
        status: 'success',
        response: { answer: 42 },
        response_status: 200,
        timestamp: Number(got.headers['x-service-webhook-timestamp']),
      });
      expect(Math.abs(env.timestamp - Date.now() / 1000)).toBeLessThan(60);
    }
    // Never the secret, anywhere on the wire.
    expect(
      r.received.some((x) => x.body.includes(secret) || JSON.stringify(x.headers).includes(secret)),
    ).toBe(false);

    const got = r.received[0] as Received;
    const dir = mkdtempSync(join(tmpdir(), 'apphost-webhook-verify-'));
    const cases = [
      { name: 'genuine', body: got.body, want: 'valid' },
      { name: 'tampered', body: Buffer.concat([got.body, Buffer.from(' ')]), want: 'invalid' },
    ];
    const header = (h: string) => String(got.headers[h]);
    const args = [
      secret,
      header('x-request-id'),
      header('x-service-webhook-timestamp'),
      header('x-service-webhook-signature'),
    ];

    // Python snippet, run as documented (python3, standard library).
    writeFileSync(
      join(dir, 'verify.py'),
      `${docSnippet('python')}\nimport sys\nbody = open(sys.argv[5], "rb").read()\nprint("valid" if verify_webhook(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], body) else "invalid")\n`,
    );
    // TypeScript snippet, run by Node's type stripping.
    writeFileSync(
      join(dir, 'verify.ts'),
      `${docSnippet('ts')}\nimport { readFileSync } from 'node:fs';\nconst [s, id, ts, sig, f] = process.argv.slice(2) as [string, string, string, string, string];\nconsole.log(verifyWebhook(s, id, ts, sig, readFileSync(f)) ? 'valid' : 'invalid');\n`,
    );
    for (const c of cases) {
      const file = join(dir, `${c.name}.body`);
      writeFileSync(file, c.body);
      expect(
        execFileSync('python3', [join(dir, 'verify.py'), ...args, file], { encoding: 'utf8' }).trim(),
      ).toBe(c.want);
      expect(
        execFileSync(process.execPath, [join(dir, 'verify.ts'), ...args, file], { encoding: 'utf8' }).trim(),
      ).toBe(c.want);
    }
    // A wrong secret fails both.
    const genuine = join(dir, 'genuine.body');
    expect(
      execFileSync('python3', [join(dir, 'verify.py'), 'nope', ...args.slice(1), genuine], {
        encoding: 'utf8',
      }).trim(),
    ).toBe('invalid');
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('bounds and sharing', () => {
  it('an endless answer is cut off after the read limit, not read until the timeout', async () => {
    const r = await receiver(() => ({ status: 200, endless: true }));
    const job = makeJob({ endpoint: r.url });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId);
    expect(rec.attempts.map((a) => [a.outcome, a.status])).toEqual([['success', 200]]);
    await waitFor('the receiver to see its connection closed', async () => r.closedAt.has(1), 10_000, 20);
    // Closed by the size bound, well before the per-attempt timeout would have cut it.
    expect((r.closedAt.get(1) as number) - (r.received[0] as Received).at).toBeLessThan(ATTEMPT_TIMEOUT_MS);
  });

  it('replicas share the durable consumer: every job delivered exactly once', async () => {
    const otherRegistry = new Registry();
    const other = createWebhookDispatcher({
      nc: nats.nc,
      secretBox,
      log: silentLogger(),
      registry: otherRegistry,
      settings: {
        ...DEFAULT_WEBHOOK_SETTINGS,
        allowCidrs: ['127.0.0.0/8'],
        concurrency: 2,
        pullExpiresMs: 2_000,
      },
      deliveriesKv: nats.kv,
    });
    await other.start();
    try {
      const r = await receiver(() => ({ status: 200, delayMs: 100 }));
      const jobs = Array.from({ length: 16 }, () => makeJob({ endpoint: r.url }));
      await Promise.all(jobs.map((j) => publish(nats.js, j)));
      for (const j of jobs) expect((await waitForFinal(nats, j.requestId)).state).toBe('delivered');
      await sleep(300);
      const ids = r.received.map((x) => String(x.headers['x-request-id']));
      expect(ids.sort()).toEqual(jobs.map((j) => j.requestId).sort());
      expect(await otherRegistry.metrics()).toMatch(
        /apphost_webhook_attempts_total\{outcome="success"\} [1-9]/,
      );
    } finally {
      await other.stop(10_000);
    }
  });

  it('connects to the checked address, never a second DNS answer; Host stays the name', async () => {
    const r = await receiver(() => ({ status: 200 }));
    const job = makeJob({ endpoint: `http://hook.pinned.invalid:${r.port}/hook` });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId);
    expect(rec.attempts.map((a) => a.outcome)).toEqual(['success']);
    expect(rec.endpointHost).toBe('hook.pinned.invalid');
    expect(r.received[0]?.headers.host).toBe(`hook.pinned.invalid:${r.port}`);
  });

  it('a malformed job is dropped without stopping the dispatcher', async () => {
    await nats.js.publish('apphost.webhooks.proj.app', 'this is not a job', { msgID: 'garbage-1' });
    const r = await receiver(() => ({ status: 200 }));
    const job = makeJob({ endpoint: r.url });
    await publish(nats.js, job);
    expect((await waitForFinal(nats, job.requestId)).state).toBe('delivered');
    await waitFor(
      'the malformed job to leave the stream',
      async () => (await nats.jsm.streams.info(WEBHOOKS_STREAM)).state.messages === 0,
      10_000,
    );
  });

  it('delivery records are written compare-and-set', async () => {
    const store = createDeliveryStore(nats.kv);
    const rec = {
      requestId: 'cas-test',
      projectId: 'p',
      appName: 'a',
      endpointHost: 'h',
      state: 'pending' as const,
      attempts: [],
      updatedAt: new Date().toISOString(),
    };
    const rev = await store.save(rec, 0);
    await expect(store.save(rec, 0)).rejects.toBeInstanceOf(DeliveryConflictError);
    const rev2 = await store.save({ ...rec, state: 'delivered' }, rev);
    await expect(store.save(rec, rev)).rejects.toBeInstanceOf(DeliveryConflictError);
    expect(await store.load('cas-test')).toMatchObject({ revision: rev2, record: { state: 'delivered' } });
    expect(await store.get('no-such-request')).toBeUndefined();
    // Request ids outside the KV key alphabet still work.
    await store.save({ ...rec, requestId: 'odd id/with.dots' }, 0);
    expect((await store.get('odd id/with.dots'))?.requestId).toBe('odd id/with.dots');
  });
});

describe('retry table (spec §6.2)', () => {
  const expectGapsWithinSpec = (r: Receiver) => {
    for (const g of gaps(r.received)) expect(g).toBeLessThanOrEqual(MAX_GAP_MS);
  };

  it('404 then 200 → 2 attempts, delivered', async () => {
    const r = await receiver((n) => ({ status: n === 1 ? 404 : 200 }));
    const job = makeJob({ endpoint: r.url });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId);
    expect(rec.state).toBe('delivered');
    expect(rec.attempts.map((a) => [a.attempt, a.outcome, a.status])).toEqual([
      [1, 'http_retryable', 404],
      [2, 'success', 200],
    ]);
    expect(r.received).toHaveLength(2);
    expect(r.received.every((x) => x.headers['x-request-id'] === job.requestId)).toBe(true);
    expectGapsWithinSpec(r);
  });

  it('always 404 → 3 attempts, then failed', async () => {
    const r = await receiver(() => ({ status: 404 }));
    const job = makeJob({ endpoint: r.url });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId);
    expect(rec.state).toBe('failed');
    expect(rec.attempts.map((a) => a.status)).toEqual([404, 404, 404]);
    await sleep(RETRY_DELAY_MS * 3);
    expect(r.received).toHaveLength(3);
    expectGapsWithinSpec(r);
  });

  it.each([400, 401, 403, 429, 500, 503])('%i → 1 attempt, permanent failure', async (status) => {
    const r = await receiver(() => ({ status }));
    const job = makeJob({ endpoint: r.url });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId);
    expect(rec.state).toBe('failed');
    expect(rec.attempts).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'http_permanent', status }),
    ]);
    await sleep(RETRY_DELAY_MS * 3);
    expect(r.received).toHaveLength(1);
  });

  it.each([302, 304, 399])('%i → retried (3 attempts), redirects never followed', async (status) => {
    const elsewhere = await receiver(() => ({ status: 200 }));
    const r = await receiver(() => ({ status, headers: { location: elsewhere.url } }));
    const job = makeJob({ endpoint: r.url });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId);
    expect(rec.state).toBe('failed');
    expect(rec.attempts.map((a) => [a.outcome, a.status])).toEqual([
      ['http_retryable', status],
      ['http_retryable', status],
      ['http_retryable', status],
    ]);
    expect(r.received).toHaveLength(3);
    expect(elsewhere.received).toHaveLength(0);
    expectGapsWithinSpec(r);
  });

  it('3xx then 2xx → delivered on the retry', async () => {
    const r = await receiver((n) => ({ status: n === 1 ? 307 : 200 }));
    const job = makeJob({ endpoint: r.url });
    await publish(nats.js, job);
    expect((await waitForFinal(nats, job.requestId)).attempts.map((a) => a.status)).toEqual([307, 200]);
  });

  it('connection refused → 3 attempts, then failed', async () => {
    const port = await freePort();
    const job = makeJob({ endpoint: `http://127.0.0.1:${port}/hook` });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId);
    expect(rec.state).toBe('failed');
    expect(rec.attempts.map((a) => a.outcome)).toEqual(['network_error', 'network_error', 'network_error']);
    expect(rec.attempts[0]?.error).toMatch(/ECONNREFUSED/);
    // Measured gaps between attempts (from the records): within the spec's bound.
    const at = rec.attempts.map((a) => Date.parse(a.at));
    for (let i = 1; i < at.length; i++)
      expect((at[i] as number) - (at[i - 1] as number)).toBeLessThanOrEqual(MAX_GAP_MS);
  });

  it('receiver hangs past the attempt timeout → retried', async () => {
    const r = await receiver((n) => (n === 1 ? 'hang' : { status: 200 }));
    const job = makeJob({ endpoint: r.url });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId);
    expect(rec.state).toBe('delivered');
    expect(rec.attempts.map((a) => a.outcome)).toEqual(['timeout', 'success']);
    expect(rec.attempts[0]?.durationMs).toBeGreaterThanOrEqual(ATTEMPT_TIMEOUT_MS - 50);
    expect(r.received).toHaveLength(2);
    // From the end of the timed-out attempt to the next one: within the spec's bound.
    const gap = (r.received[1] as Received).at - ((r.received[0] as Received).at + ATTEMPT_TIMEOUT_MS);
    expect(gap).toBeLessThanOrEqual(MAX_GAP_MS);
  });

  it('DNS failure → retried as a network error', async () => {
    const job = makeJob({ endpoint: 'http://no-such-host.invalid/hook' });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId);
    expect(rec.attempts.map((a) => a.outcome)).toEqual(['network_error', 'network_error', 'network_error']);
  });

  it('counts attempts and deliveries in the metrics', async () => {
    const text = await registry.metrics();
    const value = (re: RegExp) => Number(text.match(re)?.[1] ?? Number.NaN);
    expect(value(/apphost_webhook_attempts_total\{outcome="http_permanent"\} (\d+)/)).toBe(6);
    expect(value(/apphost_webhook_attempts_total\{outcome="timeout"\} (\d+)/)).toBe(1);
    expect(value(/apphost_webhook_deliveries_total\{result="delivered"\} (\d+)/)).toBeGreaterThanOrEqual(5);
    expect(value(/apphost_webhook_deliveries_total\{result="failed"\} (\d+)/)).toBeGreaterThanOrEqual(12);
    expect(value(/apphost_webhook_delivery_duration_seconds_count (\d+)/)).toBeGreaterThanOrEqual(17);
    // Every finished job, delivered (ack) or failed (term), has left the work-queue stream.
    expect((await nats.jsm.streams.info(WEBHOOKS_STREAM)).state.messages).toBe(0);
  });
});
