/**
 * The shared pull loop (run worker, webhook dispatcher, build worker) against a real JetStream: it pulls
 * in batches, but never more messages than it has free slots, so no message waits unhandled in a local
 * buffer while its ack wait runs; every message is handled exactly once; stop() lets handlers finish.
 */
import { AckPolicy, type JsMsg, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { systemClock } from '../../../src/shared/clock.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { startPullLoop } from '../../../src/shared/nats/pull-loop.ts';
import { createSendTurn } from '../../../src/shared/nats/send-turn.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { waitFor } from '../../harness/process.ts';

const STREAM = 'PULL_LOOP_TEST';
const WAIT_MS = 15_000;

let nats: NatsServer;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: STREAM, subjects: ['pull.>'] });
});

afterAll(async () => {
  await nc?.close();
  await nats?.stop();
});

async function consumer(name: string) {
  const jsm = await jetstreamManager(nc);
  await jsm.consumers.add(STREAM, {
    durable_name: name,
    ack_policy: AckPolicy.Explicit,
    filter_subject: `pull.${name}`,
  });
  return jetstream(nc).consumers.get(STREAM, name);
}

async function publish(name: string, n: number) {
  const js = jetstream(nc);
  for (let i = 0; i < n; i++) await js.publish(`pull.${name}`, String(i));
}

it.each([
  ['its own turn', 'bounded', undefined],
  ['a send turn shared with its handlers', 'bounded-turn', createSendTurn()],
])(
  'never holds more unacked messages than its concurrency, and handles each one once (pulls in %s)',
  async (_how, name, turn) => {
    await publish(name, 20);
    const seen: string[] = [];
    const gates: Array<() => void> = [];
    let active = 0;
    let most = 0;
    const loop = startPullLoop({
      consumer: await consumer(name),
      concurrency: 3,
      ...(turn ? { turn } : {}),
      expiresMs: 1_000,
      errorBackoffMs: 100,
      clock: systemClock,
      log: silentLogger(),
      async handle(msg: JsMsg) {
        active++;
        most = Math.max(most, active);
        seen.push(msg.string());
        await new Promise<void>((r) => gates.push(r));
        active--;
        if (turn) await turn(async () => msg.ack());
        else msg.ack();
      },
      onError: () => undefined,
    });
    const jsm = await jetstreamManager(nc);
    // Three handlers blocked: the server has handed out exactly three (none sits in a local buffer).
    await waitFor('three handlers running', async () => active === 3, WAIT_MS);
    await new Promise((r) => setTimeout(r, 300));
    expect((await jsm.consumers.info(STREAM, name)).num_ack_pending).toBe(3);
    expect(loop.inFlight()).toBe(3);
    // Release them one by one until all are done.
    while (seen.length < 20 || active > 0) {
      await waitFor('a handler to release', async () => gates.length > 0, WAIT_MS, 5);
      gates.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    loop.stop();
    await loop.done;
    expect(most).toBe(3);
    expect(seen.map(Number).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    await waitFor(
      'all acked',
      async () => (await jsm.consumers.info(STREAM, name)).num_ack_pending === 0,
      WAIT_MS,
    );
    expect((await jsm.consumers.info(STREAM, name)).num_pending).toBe(0);
  },
);

it('stop() ends the pull at once and waits for the handlers still running', async () => {
  await publish('stopping', 2);
  let release: (() => void) | undefined;
  let finished = 0;
  const loop = startPullLoop({
    consumer: await consumer('stopping'),
    concurrency: 1,
    expiresMs: 30_000,
    errorBackoffMs: 100,
    clock: systemClock,
    log: silentLogger(),
    async handle(msg: JsMsg) {
      await new Promise<void>((r) => {
        release = r;
      });
      msg.ack();
      finished++;
    },
    onError: () => undefined,
  });
  await waitFor('one handler running', async () => release !== undefined, WAIT_MS);
  loop.stop();
  let done = false;
  void loop.done.then(() => {
    done = true;
  });
  await new Promise((r) => setTimeout(r, 200));
  expect(done).toBe(false); // its handler is still running
  release?.();
  await loop.done;
  expect(finished).toBe(1);
  // The second message was never handed out (one slot, busy): it is still there for another replica.
  const info = await (await jetstreamManager(nc)).consumers.info(STREAM, 'stopping');
  expect(info.num_pending + info.num_ack_pending).toBe(1);
});
