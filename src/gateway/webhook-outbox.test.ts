import { describe, expect, it } from 'vitest';
import { systemClock } from '../shared/clock.ts';
import type { WebhookJob } from '../shared/contracts/messaging.ts';
import { silentLogger } from '../shared/log.ts';
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

describe('webhook outbox', () => {
  const make = (js: ReturnType<typeof jetstream>, maxJobs = 100, maxBytes = 1 << 20) => {
    const outcomes: OutboxOutcome[] = [];
    const outbox = createWebhookOutbox({
      publish: js.publish,
      settings: { maxJobs, maxBytes, retryDelayMs: 5, maxRetryDelayMs: 20 },
      clock: systemClock,
      log: silentLogger(),
      count: (o) => outcomes.push(o),
    });
    return { outbox, outcomes };
  };

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
