/**
 * The persistent pull subscription (src/shared/nats/pull-subscription.ts) against a real JetStream: a
 * pull hands out at most its batch and ends at the server's expiry; the pull loop on it never holds
 * more messages than free slots; acknowledgements work as nats.js's; a NATS restart ends the open pull
 * at once (the server forgot it), so pulling resumes without waiting for the pull's own bound; the
 * server's refusal ends a pull with an error; a pull given up locally takes its subscription with it,
 * and what reaches a reader for it is never handed back (a frozen reader's stale delivery is another
 * reader's by then).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/shared/clock.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { startPullLoop } from '../../../src/shared/nats/pull-loop.ts';
import {
  createPullSubscription,
  type PulledMsg,
  parseAckSubject,
} from '../../../src/shared/nats/pull-subscription.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { startProcess, waitFor } from '../../harness/process.ts';

const STREAM = 'PULL_SUB_TEST';
const WAIT_MS = 15_000;
const text = (m: PulledMsg) => new TextDecoder().decode(m.data);

let nats: NatsServer;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  await (await jetstreamManager(nc)).streams.add({ name: STREAM, subjects: ['psub.>'] });
});

afterAll(async () => {
  await nc?.close();
  await nats?.stop();
});

async function consumer(name: string, ackWaitMs = 30_000) {
  await (await jetstreamManager(nc)).consumers.add(STREAM, {
    durable_name: name,
    ack_policy: AckPolicy.Explicit,
    filter_subject: `psub.${name}`,
    ack_wait: ackWaitMs * 1_000_000,
  });
}

async function publish(name: string, n: number) {
  const js = jetstream(nc);
  for (let i = 0; i < n; i++) await js.publish(`psub.${name}`, String(i));
}

const info = async (name: string) => (await jetstreamManager(nc)).consumers.info(STREAM, name);

describe('pull subscription', () => {
  it('a pull hands out at most its batch, then the next pull the rest, then ends at the expiry', async () => {
    await consumer('batch');
    await publish('batch', 5);
    const pulls = createPullSubscription(nc, STREAM, 'batch');
    try {
      const first: PulledMsg[] = [];
      for await (const m of await pulls.fetch({ max_messages: 3, expires: 1_000 })) first.push(m);
      expect(first.map(text)).toEqual(['0', '1', '2']);
      expect(first.map((m) => m.info.deliveryCount)).toEqual([1, 1, 1]);
      expect(first.map((m) => m.seq)).toEqual([1, 2, 3]);
      expect(first[0]?.subject).toBe('psub.batch');
      // JetStream's store time, in nanoseconds.
      expect(Math.abs((first[0]?.info.timestampNanos ?? 0) / 1e6 - Date.now())).toBeLessThan(60_000);
      const second: PulledMsg[] = [];
      // Asks for 5, gets the 2 left, and ends when the server says the request expired.
      for await (const m of await pulls.fetch({ max_messages: 5, expires: 1_000 })) second.push(m);
      expect(second.map(text)).toEqual(['3', '4']);
      expect((await info('batch')).num_ack_pending).toBe(5);
      for (const m of [...first, ...second]) m.ack();
      await waitFor('all acked', async () => (await info('batch')).num_ack_pending === 0, WAIT_MS);
    } finally {
      pulls.close();
    }
  });

  it('nak with a delay, term and working answer as nats.js does', async () => {
    // An ack wait with a wide margin over the 300 ms heartbeats below: a busy machine may stall a beat.
    await consumer('answers', 6_000);
    await publish('answers', 3);
    const pulls = createPullSubscription(nc, STREAM, 'answers');
    try {
      const got: PulledMsg[] = [];
      for await (const m of await pulls.fetch({ max_messages: 3, expires: 1_000 })) got.push(m);
      const [nakked, termed, worked] = got as [PulledMsg, PulledMsg, PulledMsg];
      nakked.nak(200);
      termed.term('done with it');
      worked.working();
      // The nak'd one comes back as its 2nd delivery; the termed one never does.
      const again: PulledMsg[] = [];
      for await (const m of await pulls.fetch({ max_messages: 1, expires: 5_000 })) again.push(m);
      expect(again.map((m) => [text(m), m.info.deliveryCount])).toEqual([['0', 2]]);
      again[0]?.ack();
      // Told "still working" every 300 ms while a pull stays open longer than its 6 s ack wait: it is
      // not handed out again (without working(), it would come in this pull).
      const beat = setInterval(() => worked.working(), 300);
      const late: PulledMsg[] = [];
      try {
        for await (const m of await pulls.fetch({ max_messages: 3, expires: 7_000 })) late.push(m);
      } finally {
        clearInterval(beat);
      }
      expect(late.map(text)).toEqual([]);
      worked.ack();
      await waitFor('all answered', async () => (await info('answers')).num_ack_pending === 0, WAIT_MS);
    } finally {
      pulls.close();
    }
  });

  it('the pull loop on it never holds more unacked messages than its free slots', async () => {
    await consumer('bounded');
    await publish('bounded', 20);
    const pulls = createPullSubscription(nc, STREAM, 'bounded');
    const seen: string[] = [];
    const gates: Array<() => void> = [];
    let active = 0;
    let most = 0;
    const loop = startPullLoop({
      consumer: pulls,
      concurrency: 3,
      expiresMs: 1_000,
      errorBackoffMs: 100,
      clock: systemClock,
      log: silentLogger(),
      async handle(msg) {
        active++;
        most = Math.max(most, active);
        seen.push(text(msg));
        await new Promise<void>((r) => gates.push(r));
        active--;
        msg.ack();
      },
      onError: () => undefined,
    });
    try {
      await waitFor('three handlers running', async () => active === 3, WAIT_MS);
      await new Promise((r) => setTimeout(r, 300));
      expect((await info('bounded')).num_ack_pending).toBe(3);
      while (seen.length < 20 || active > 0) {
        await waitFor('a handler to release', async () => gates.length > 0, WAIT_MS, 5);
        gates.shift()?.();
        await new Promise((r) => setImmediate(r));
      }
    } finally {
      loop.stop();
      await loop.done;
      pulls.close();
    }
    expect(most).toBe(3);
    expect(seen.map(Number).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    await waitFor('all acked', async () => (await info('bounded')).num_ack_pending === 0, WAIT_MS);
    expect((await info('bounded')).num_pending).toBe(0);
  });

  it('a NATS restart ends the open pull, so the loop pulls again at once (not after the pull bound)', async () => {
    await consumer('restart');
    const pulls = createPullSubscription(nc, STREAM, 'restart');
    const seen: string[] = [];
    const loop = startPullLoop({
      consumer: pulls,
      concurrency: 4,
      // Far beyond this test's wait: only the restart handling can end the pull in time.
      expiresMs: 60_000,
      errorBackoffMs: 100,
      clock: systemClock,
      log: silentLogger(),
      async handle(msg) {
        seen.push(text(msg));
        msg.ack();
      },
      onError: () => undefined,
    });
    try {
      await publish('restart', 1);
      await waitFor('the job before the restart', async () => seen.length === 1, WAIT_MS);
      await nats.stop({ keepStore: true });
      await nats.restart();
      await waitFor(
        'reconnected',
        async () =>
          !nc.isClosed() &&
          (await nc.rtt().then(
            () => true,
            () => false,
          )),
        WAIT_MS,
        100,
      );
      await publish('restart', 1);
      await waitFor('the job after the restart', async () => seen.length === 2, WAIT_MS);
    } finally {
      loop.stop();
      await loop.done;
      pulls.close();
    }
    expect(seen).toEqual(['0', '0']);
  });

  it('a pull the reader stops takes its subscription: what it would have got stays a first delivery for the next pull', async () => {
    await consumer('stopped');
    const pulls = createPullSubscription(nc, STREAM, 'stopped');
    try {
      const pull = await pulls.fetch({ max_messages: 1, expires: 10_000 });
      await nc.flush();
      await waitFor(
        'the pull waiting on the server',
        async () => (await info('stopped')).num_waiting === 1,
        WAIT_MS,
      );
      pull.stop();
      // Stored while the stopped request may still wait on the server: nobody listens to it any more.
      await publish('stopped', 1);
      const next: PulledMsg[] = [];
      for await (const m of await pulls.fetch({ max_messages: 1, expires: 5_000 })) next.push(m);
      expect(next.map((m) => [text(m), m.info.deliveryCount])).toEqual([['0', 1]]);
      next[0]?.ack();
    } finally {
      pulls.close();
    }
  });

  it('a reader frozen past the ack wait does not hand back what reached it meanwhile: the reader holding it now keeps it', async () => {
    await consumer('frozen', 3_000);
    const dir = mkdtempSync(join(tmpdir(), 'apphost-frozen-reader-'));
    const logFile = join(dir, 'reader.log');
    const said = () => readFileSync(logFile, 'utf8');
    // Its pull waits 5 s on the server (room for a busy machine between its pull and our publish) and is
    // given up 2 s later (PULL_ANSWER_GRACE_MS).
    const reader = startProcess(
      'frozen-reader',
      process.execPath,
      [join(import.meta.dirname, 'frozen-reader.ts'), nats.url, STREAM, 'frozen', '5000'],
      { logFile },
    );
    let pid = 0;
    const pulls = createPullSubscription(nc, STREAM, 'frozen');
    let beat: NodeJS.Timeout | undefined;
    try {
      await waitFor('the reader pulling', async () => /pulling \d+/.test(said()), WAIT_MS);
      pid = Number(/pulling (\d+)/.exec(said())?.[1]);
      process.kill(pid, 'SIGSTOP');
      // Delivered into the frozen reader's socket; its ack wait passes there.
      await publish('frozen', 1);
      await waitFor(
        'delivered to the frozen reader',
        async () => (await info('frozen')).num_ack_pending === 1,
        WAIT_MS,
      );
      const mine: PulledMsg[] = [];
      for await (const m of await pulls.fetch({ max_messages: 1, expires: 10_000 })) mine.push(m);
      expect(mine.map((m) => [text(m), m.info.deliveryCount])).toEqual([['0', 2]]);
      const held = mine[0] as PulledMsg;
      beat = setInterval(() => held.working(), 300);
      // Frozen past its pull's local bound: on waking the pull is over, whether its timer runs first or the
      // read of its socket (epoll reports the waiting message before the timer is due to run).
      await new Promise((r) => setTimeout(r, 7_500));
      process.kill(pid, 'SIGCONT');
      await waitFor('the reader done', async () => said().includes('done'), WAIT_MS);
      expect(said()).not.toContain('got ');
      // A nak from the reader would have made JetStream hand the message out again (3rd delivery).
      const again: PulledMsg[] = [];
      for await (const m of await pulls.fetch({ max_messages: 1, expires: 1_000 })) again.push(m);
      expect(again.map((m) => m.info.deliveryCount)).toEqual([]);
      expect((await info('frozen')).delivered.consumer_seq).toBe(2);
      held.ack();
    } finally {
      clearInterval(beat);
      try {
        if (pid) process.kill(pid, 'SIGCONT');
      } catch {
        // exited already
      }
      await reader.stop(5_000);
      pulls.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the server's refusal ends the pull with an error", async () => {
    const pulls = createPullSubscription(nc, STREAM, 'no-such-consumer');
    try {
      const pull = await pulls.fetch({ max_messages: 1, expires: 5_000 });
      await expect(
        (async () => {
          for await (const _ of pull) {
            // nothing comes
          }
        })(),
      ).rejects.toThrow();
    } finally {
      pulls.close();
    }
  });
});

describe('parseAckSubject', () => {
  it('reads both reply-subject forms', () => {
    expect(parseAckSubject('$JS.ACK.S.C.2.17.5.1700000000000000000.3')).toEqual({
      deliveryCount: 2,
      streamSequence: 17,
      timestampNanos: 1700000000000000000,
    });
    expect(parseAckSubject('$JS.ACK.dom.ACCHASH.S.C.3.18.6.1700000000000000000.0.xyz')).toEqual({
      deliveryCount: 3,
      streamSequence: 18,
      timestampNanos: 1700000000000000000,
    });
    expect(() => parseAckSubject('_INBOX.abc')).toThrow(/not a jetstream message/);
  });
});
