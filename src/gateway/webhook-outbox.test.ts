import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../shared/clock.ts';
import type { WebhookJob } from '../shared/contracts/messaging.ts';
import { createLogger, silentLogger } from '../shared/log.ts';
import { createWebhookOutbox, type OutboxOutcome } from './webhook-outbox.ts';

const job = (requestId: string, bodyBytes = 10): WebhookJob => ({
  v: 1,
  requestId,
  projectId: 'p',
  appName: 'a',
  target: { endpoint: 'https://receiver.example/hook' },
  response: { status: 200, bodyBase64: 'x'.repeat(bodyBytes) },
  runStatus: 'success',
  completedAt: new Date(0).toISOString(),
});

/** JetStream stand-in: refuses while `down`, records what it took (outages are what NATS cannot fake on cue). */
function jetstream() {
  const taken: string[] = [];
  const js = {
    down: true,
    taken,
    publish: async (j: WebhookJob) => {
      if (js.down) throw new Error('no responders');
      taken.push(j.requestId);
    },
  };
  return js;
}

const until = async (what: () => boolean, ms = 10_000) => {
  const end = Date.now() + ms;
  while (!what()) {
    if (Date.now() > end) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 10));
  }
};

/** A logger whose JSON lines are kept, to read what an operator would. */
function capturingLogger() {
  const lines: Array<{ msg: string; requestId?: string }> = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l.trim()) lines.push(JSON.parse(l));
      done();
    },
  });
  return { log: createLogger({ name: 'outbox-test', destination }), lines };
}

describe('webhook outbox', () => {
  const make = (
    js: ReturnType<typeof jetstream>,
    maxJobs = 100,
    maxBytes = 1 << 20,
    log = silentLogger(),
  ) => {
    const outcomes: OutboxOutcome[] = [];
    const outbox = createWebhookOutbox({
      publish: js.publish,
      settings: { maxJobs, maxBytes, retryDelayMs: 5, maxRetryDelayMs: 20 },
      clock: systemClock,
      log,
      count: (o) => outcomes.push(o),
    });
    return { outbox, outcomes };
  };

  it('logs each job it holds and each held job it queues later, by request id (a crash loses the held, never queued)', async () => {
    const js = jetstream();
    const { log, lines } = capturingLogger();
    const { outbox } = make(js, 100, 1 << 20, log);
    for (const id of ['a', 'b']) outbox.add(job(id), log.child({ requestId: id }));
    await until(() => outbox.pending() === 2);
    js.down = false;
    await until(() => outbox.pending() === 0);
    const said = (msg: string) =>
      lines
        .filter((l) => l.msg === msg)
        .map((l) => l.requestId)
        .sort();
    expect(said('webhook job held until JetStream takes it')).toEqual(['a', 'b']);
    expect(said('held webhook job queued')).toEqual(['a', 'b']);
    await outbox.close(1_000);
  });

  it('holds what JetStream refuses and hands it over once it takes jobs again', async () => {
    const js = jetstream();
    const { outbox, outcomes } = make(js);
    for (const id of ['a', 'b', 'c']) outbox.add(job(id), silentLogger());
    await until(() => outcomes.filter((o) => o === 'held').length === 3);
    expect(outbox.pending()).toBe(3);
    js.down = false;
    await until(() => outbox.pending() === 0);
    expect(js.taken.sort()).toEqual(['a', 'b', 'c']);
    expect(outcomes.filter((o) => o === 'queued_after_retry')).toHaveLength(3);
    await outbox.close(1_000);
  });

  it('drops (and counts) what does not fit, by jobs and by bytes', async () => {
    const js = jetstream();
    const byJobs = make(js, 2);
    for (const id of ['a', 'b', 'c']) byJobs.outbox.add(job(id), silentLogger());
    await until(() => byJobs.outcomes.length === 3);
    expect(byJobs.outcomes.sort()).toEqual(['dropped', 'held', 'held']);
    const byBytes = make(js, 100, 3_000);
    byBytes.outbox.add(job('small'), silentLogger());
    byBytes.outbox.add(job('big', 5_000), silentLogger());
    await until(() => byBytes.outcomes.length === 2);
    expect(byBytes.outcomes.sort()).toEqual(['dropped', 'held']);
    await Promise.all([byJobs.outbox.close(10), byBytes.outbox.close(10)]);
  });

  it('on close, retries within the bound, then gives up and drops what comes later', async () => {
    const js = jetstream();
    const { outbox, outcomes } = make(js);
    outbox.add(job('a'), silentLogger());
    await until(() => outbox.pending() === 1 && outcomes.includes('held'));
    setTimeout(() => {
      js.down = false;
    }, 50);
    await outbox.close(5_000);
    expect(js.taken).toEqual(['a']);
    js.down = true;
    outbox.add(job('late'), silentLogger());
    await until(() => outcomes.includes('dropped'));
  });
});
