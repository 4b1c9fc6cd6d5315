import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { Clock } from '../shared/clock.ts';
import type { WebhookDeliveryRecord, WebhookJob } from '../shared/contracts/messaging.ts';
import { silentLogger } from '../shared/log.ts';
import { createSecretBox } from '../shared/secretbox.ts';
import { DeliveryConflictError, type DeliveryStore } from './deliveries.ts';
import { createJobHandler, INTERRUPTED_ATTEMPT, type JobMessage } from './handle-job.ts';
import type { AttemptResult } from './http-transport.ts';
import { createWebhookMetrics } from './metrics.ts';

const box = createSecretBox('unit-test-platform-key');

function memoryStore(seed?: WebhookDeliveryRecord, failWith?: Error): DeliveryStore & { saves: number } {
  let current: { record: WebhookDeliveryRecord; revision: number } | undefined = seed
    ? { record: structuredClone(seed), revision: 1 }
    : undefined;
  return {
    saves: 0,
    async load() {
      return current ? structuredClone(current) : undefined;
    },
    async get() {
      return current ? structuredClone(current.record) : undefined;
    },
    async save(record, revision) {
      if (failWith) throw failWith;
      if ((current?.revision ?? 0) !== revision) throw new DeliveryConflictError(record.requestId);
      this.saves++;
      current = { record: structuredClone(record), revision: revision + 1 };
      return revision + 1;
    },
  };
}

const NOW = 1_700_000_000_000;
const GIVE_UP_MS = 3_600_000;

/** A delivery of `data`; the job was queued `queuedAgoMs` before the clock's now. */
function message(data: unknown, deliveryCount = 1, queuedAgoMs = 1_000) {
  const calls: string[] = [];
  const msg: JobMessage = {
    data: Buffer.from(typeof data === 'string' ? data : JSON.stringify(data)),
    seq: 1,
    subject: 'apphost.webhooks.p.a',
    info: { deliveryCount, timestampNanos: (NOW - queuedAgoMs) * 1e6 },
    ack: () => calls.push('ack'),
    nak: (ms) => calls.push(`nak:${ms}`),
    term: () => calls.push('term'),
    working: () => {},
  };
  return { msg, calls };
}

const job = (over: Partial<WebhookJob['target']> = {}): WebhookJob => ({
  v: 1,
  requestId: 'req-1',
  projectId: 'p',
  appName: 'a',
  target: { endpoint: 'https://hooks.example.com/in', ...over },
  response: { status: 200, bodyBase64: Buffer.from('{"x":1}').toString('base64') },
  runStatus: 'success',
  completedAt: new Date(0).toISOString(),
});

const pending = (attempts: number): WebhookDeliveryRecord => ({
  requestId: 'req-1',
  projectId: 'p',
  appName: 'a',
  endpointHost: 'hooks.example.com',
  state: 'pending',
  attempts: Array.from({ length: attempts }, (_, i) => ({
    attempt: i + 1,
    at: new Date(0).toISOString(),
    outcome: 'http_retryable' as const,
    status: 404,
    durationMs: 1,
  })),
  updatedAt: new Date(0).toISOString(),
});

const clock: Clock = { now: () => NOW, sleep: async () => {} };

function setup(opts: {
  result?: AttemptResult;
  store?: DeliveryStore & { saves: number };
  ack?: (msg: JobMessage) => void;
}) {
  const store = opts.store ?? memoryStore();
  const sent: Array<{ url: string; headers: Record<string, string> }> = [];
  const handle = createJobHandler({
    store,
    transport: {
      async send(url, req) {
        sent.push({ url: url.href, headers: req.headers });
        return opts.result ?? { outcome: 'success', status: 200 };
      },
    },
    secretBox: box,
    log: silentLogger(),
    metrics: createWebhookMetrics(new Registry()),
    clock,
    retryDelayMs: 1_500,
    errorBackoffMs: 1_000,
    errorBackoffMaxMs: 30_000,
    recordGiveUpMs: GIVE_UP_MS,
    ...(opts.ack ? { ack: opts.ack } : {}),
  });
  return { handle, store, sent };
}

describe('job handler: what JetStream is told', () => {
  it.each<[string, AttemptResult, number, string, WebhookDeliveryRecord['state']]>([
    ['2xx', { outcome: 'success', status: 204 }, 0, 'ack', 'delivered'],
    ['404 on attempt 1', { outcome: 'http_retryable', status: 404 }, 0, 'nak:1500', 'pending'],
    ['timeout on attempt 2', { outcome: 'timeout' }, 1, 'nak:1500', 'pending'],
    ['404 on attempt 3', { outcome: 'http_retryable', status: 404 }, 2, 'term', 'failed'],
    ['network error on attempt 3', { outcome: 'network_error' }, 2, 'term', 'failed'],
    ['500', { outcome: 'http_permanent', status: 500 }, 0, 'term', 'failed'],
    ['refused by policy', { outcome: 'refused_by_policy' }, 0, 'term', 'failed'],
  ])('%s → %s', async (_name, result, before, want, state) => {
    const store = memoryStore(before ? pending(before) : undefined);
    const { handle, sent } = setup({ result, store });
    const { msg, calls } = message(job(), before + 1);
    await handle(msg);
    expect(calls).toEqual([want]);
    expect(sent).toHaveLength(1);
    const rec = (await store.get('req-1')) as WebhookDeliveryRecord;
    expect(rec.state).toBe(state);
    expect(rec.attempts).toHaveLength(before + 1);
    expect(rec.attempts.at(-1)).toMatchObject({ attempt: before + 1, outcome: result.outcome });
    expect(rec.attempts.at(-1)?.error).not.toBe(INTERRUPTED_ATTEMPT);
  });

  it("a delivered job is acked through the dispatcher's ack (its send turn), once its record says delivered", async () => {
    const store = memoryStore();
    const acked: string[] = [];
    const { handle } = setup({
      store,
      ack: (m) => {
        void store.get('req-1').then((r) => acked.push(`${m.seq}:${r?.state}`));
      },
    });
    const { msg, calls } = message(job());
    await handle(msg);
    await new Promise((r) => setImmediate(r));
    expect([calls, acked]).toEqual([[], ['1:delivered']]);
  });

  it('a finished record (lost ack) is acked without another attempt', async () => {
    const store = memoryStore({ ...pending(1), state: 'delivered' });
    const { handle, sent } = setup({ store });
    const { msg, calls } = message(job(), 2);
    await handle(msg);
    expect([calls, sent.length]).toEqual([['ack'], 0]);
  });

  // A first delivery creates its record without reading it first; a record that exists after all (the job
  // was queued again for a run that finished before) is read and decided on, never overwritten.
  it('first delivery of a job whose delivery finished before → acked, no attempt, record kept', async () => {
    const store = memoryStore({ ...pending(1), state: 'delivered' });
    const { handle, sent } = setup({ store });
    const { msg, calls } = message(job(), 1);
    await handle(msg);
    expect([calls, sent.length]).toEqual([['ack'], 0]);
    expect(await store.get('req-1')).toMatchObject({ state: 'delivered', attempts: [{ attempt: 1 }] });
  });

  it('first delivery of a job with 2 attempts on record → attempt 3 (the count survives), then failed', async () => {
    const store = memoryStore(pending(2));
    const { handle, sent } = setup({ result: { outcome: 'http_retryable', status: 404 }, store });
    const { msg, calls } = message(job(), 1);
    await handle(msg);
    expect([calls, sent.length]).toEqual([['term'], 1]);
    const rec = (await store.get('req-1')) as WebhookDeliveryRecord;
    expect(rec.state).toBe('failed');
    expect(rec.attempts.map((a) => a.attempt)).toEqual([1, 2, 3]);
  });

  it('first delivery of a job with 3 attempts on record → failed, no 4th attempt', async () => {
    const store = memoryStore(pending(3));
    const { handle, sent } = setup({ store });
    const { msg, calls } = message(job(), 1);
    await handle(msg);
    expect([calls, sent.length]).toEqual([['term'], 0]);
    expect((await store.get('req-1'))?.attempts).toHaveLength(3);
  });

  it('three attempts already started (the last one cut short) → failed, no 4th attempt', async () => {
    const store = memoryStore(pending(3));
    const { handle, sent } = setup({ store });
    const { msg, calls } = message(job(), 4);
    await handle(msg);
    expect([calls, sent.length]).toEqual([['term'], 0]);
    expect((await store.get('req-1'))?.state).toBe('failed');
  });

  it('a job handed out again and again while its record could not be read is still attempted (CI chaos run)', async () => {
    // The deliveries bucket answered "jetstream is not enabled" for ~13 s after a NATS node was killed;
    // a cap on deliveries then gave up a sync call's webhook that had not used its attempts.
    const store = memoryStore(pending(1));
    let down = true;
    const load = store.load.bind(store);
    store.load = async (id) => {
      if (down) throw new Error('jetstream is not enabled');
      return load(id);
    };
    const { handle, sent } = setup({ store });
    const naks: string[] = [];
    for (let delivery = 2; delivery <= 14; delivery++) {
      const { msg, calls } = message(job(), delivery, 60_000);
      await handle(msg);
      naks.push(...calls);
    }
    expect(naks).toEqual([
      'nak:2000',
      'nak:4000',
      'nak:8000',
      'nak:16000',
      ...Array.from({ length: 9 }, () => 'nak:30000'),
    ]);
    down = false;
    const { msg, calls } = message(job(), 15, 300_000);
    await handle(msg);
    expect([calls, sent.length]).toEqual([['ack'], 1]);
    const rec = await store.get('req-1');
    expect([rec?.state, rec?.attempts.map((a) => a.attempt)]).toEqual(['delivered', [1, 2]]);
  });

  it('a record that stays unreadable past the give-up bound → the job is given up, no attempt', async () => {
    const { handle, sent } = setup({ store: memoryStore(undefined, new Error('nats down')) });
    const young = message(job(), 40, GIVE_UP_MS - 1_000);
    await handle(young.msg);
    expect(young.calls).toEqual(['nak:30000']);
    const old = message(job(), 41, GIVE_UP_MS + 1_000);
    await handle(old.msg);
    expect([old.calls, sent.length]).toEqual([['term'], 0]);
  });

  it('a malformed job is termed', async () => {
    const { handle, sent } = setup({});
    for (const data of ['not json', { v: 2 }, { v: 1, requestId: 'x' }]) {
      const { msg, calls } = message(data);
      await handle(msg);
      expect(calls).toEqual(['term']);
    }
    expect(sent).toHaveLength(0);
  });

  it('the record cannot be written → nak with the error backoff, no attempt', async () => {
    const { handle, sent } = setup({ store: memoryStore(undefined, new Error('nats down')) });
    const { msg, calls } = message(job());
    await handle(msg);
    expect([calls, sent.length]).toEqual([['nak:1000'], 0]);
  });

  it('another dispatcher took the job over → leave it alone', async () => {
    const store = memoryStore(pending(1));
    const { handle, sent } = setup({ store });
    const { msg, calls } = message(job(), 2);
    // Someone else writes between our load and our save.
    const load = store.load.bind(store);
    store.load = async (id) => {
      const r = await load(id);
      await store.save({ ...pending(2) }, 1);
      return r;
    };
    await handle(msg);
    expect([calls, sent.length]).toEqual([[], 0]);
  });

  it('signs with the opened secret; an unopenable secret is a permanent failure', async () => {
    const ok = setup({});
    await ok.handle(message(job({ sealedSecret: box.seal('s3cret') })).msg);
    expect(ok.sent[0]?.headers['x-service-webhook-signature']).toMatch(/^v1,[0-9a-f]{64}$/);
    expect(ok.sent[0]?.headers['x-service-webhook-timestamp']).toBe('1700000000');

    const bad = setup({});
    const { msg, calls } = message(job({ sealedSecret: createSecretBox('another-platform-key').seal('s') }));
    await bad.handle(msg);
    expect([calls, bad.sent.length]).toEqual([['term'], 0]);
    expect((await bad.store.get('req-1'))?.attempts[0]).toMatchObject({ outcome: 'refused_by_policy' });
  });
});

describe('job handler: heartbeats', () => {
  it('every attempt in flight tells JetStream it is being worked on until it ends, and none after', async () => {
    const beats = new Map<string, number>();
    const finishers: Array<() => void> = [];
    const handle = createJobHandler({
      store: memoryStore(),
      transport: {
        send: () =>
          new Promise<AttemptResult>((resolve) => {
            finishers.push(() => resolve({ outcome: 'success', status: 200 }));
          }),
      },
      secretBox: box,
      log: silentLogger(),
      metrics: createWebhookMetrics(new Registry()),
      clock,
      retryDelayMs: 1_500,
      errorBackoffMs: 1_000,
      errorBackoffMaxMs: 30_000,
      recordGiveUpMs: GIVE_UP_MS,
      heartbeatMs: 5,
    });
    const delivery = (id: string) => {
      const { msg } = message({ ...job(), requestId: id });
      return { ...msg, working: () => beats.set(id, (beats.get(id) ?? 0) + 1) };
    };
    const first = handle(delivery('one'));
    const second = handle(delivery('two'));
    await expect.poll(() => (beats.get('one') ?? 0) >= 2 && (beats.get('two') ?? 0) >= 2).toBe(true);
    finishers.shift()?.();
    await first;
    const oneAfter = beats.get('one');
    await expect.poll(() => (beats.get('two') ?? 0) >= 4).toBe(true);
    expect(beats.get('one')).toBe(oneAfter);
    finishers.shift()?.();
    await second;
    const twoAfter = beats.get('two');
    await new Promise((r) => setTimeout(r, 30));
    expect(beats.get('two')).toBe(twoAfter);
  });
});
