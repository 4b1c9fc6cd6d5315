/**
 * The delivery-record bucket unavailable while the WEBHOOKS stream works (real NATS): the job keeps
 * being handed out again with a growing pause, uses no attempt while its record cannot be read or
 * written, and is delivered once the bucket answers again. Found by the chaos test in CI: after a NATS
 * node was SIGKILLed the bucket answered "jetstream is not enabled" for ~13 s, and a cap of 10
 * deliveries gave up a sync call's webhook that had used 1 of its 3 attempts.
 *
 * The outage here is the bucket's stream deleted and created again (its records go with it): the
 * fault a real server can be made to produce on demand for longer than a few redeliveries.
 */
import { Writable } from 'node:stream';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEBHOOK_DELIVERIES_BUCKET } from '../../../src/shared/contracts/messaging.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { createWebhookDispatcher, type WebhookDispatcher } from '../../../src/webhooks/dispatcher.ts';
import { DEFAULT_WEBHOOK_SETTINGS } from '../../../src/webhooks/settings.ts';
import { openDeliveriesBucket } from '../../../src/webhooks/stream.ts';
import { waitFor } from '../../harness/process.ts';
import {
  makeJob,
  publish,
  type Receiver,
  startReceiver,
  startWebhookNats,
  type WebhookNats,
  waitForFinal,
} from './helpers.ts';

/** Short pauses so many redeliveries fit in a short outage (the defaults are 1 s doubling to 30 s). */
const ERROR_BACKOFF_MS = 50;
const ERROR_BACKOFF_MAX_MS = 200;
/** Long enough for well over 10 deliveries at the pauses above. */
const OUTAGE_MS = 4_000;

let nats: WebhookNats;
let dispatcher: WebhookDispatcher;
let receiver: Receiver;
/** The "not processed; will be redelivered" warnings, per request id (from the dispatcher's own log). */
const unprocessed = new Map<string, number>();
const logLines = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.includes('webhook job not processed; will be redelivered')) continue;
      const id = String((JSON.parse(line) as { requestId?: string }).requestId);
      unprocessed.set(id, (unprocessed.get(id) ?? 0) + 1);
    }
    done();
  },
});

beforeAll(async () => {
  nats = await startWebhookNats();
  receiver = await startReceiver((n) => ({ status: n === 1 ? 404 : 200 }));
  dispatcher = createWebhookDispatcher({
    nc: nats.nc,
    secretBox: createSecretBox('record-outage-platform-key-0123'),
    log: createLogger({ name: 'webhooks', level: 'warn', destination: logLines }),
    registry: new Registry(),
    settings: {
      ...DEFAULT_WEBHOOK_SETTINGS,
      allowCidrs: ['127.0.0.0/8'],
      // Attempt 2 comes after the outage has begun.
      retryDelayMs: 1_000,
      errorBackoffMs: ERROR_BACKOFF_MS,
      recordRetryMaxDelayMs: ERROR_BACKOFF_MAX_MS,
      pullExpiresMs: 2_000,
    },
    deliveriesKv: nats.kv,
  });
  await dispatcher.start();
});

afterAll(async () => {
  await dispatcher?.stop(10_000);
  await receiver?.close();
  await nats?.close();
});

describe('delivery-record bucket unavailable', () => {
  it('redelivers without using attempts, then delivers once the bucket answers again', async () => {
    const job = makeJob({ endpoint: receiver.url });
    await publish(nats.js, job);
    await waitFor('attempt 1 (404) recorded', async () => receiver.received.length === 1, 30_000, 10);

    await nats.jsm.streams.delete(`KV_${WEBHOOK_DELIVERIES_BUCKET}`);
    await waitFor(
      'more than 10 deliveries refused for the record',
      async () => (unprocessed.get(job.requestId) ?? 0) > 10,
      OUTAGE_MS * 10,
      20,
    );
    expect(receiver.received, 'no attempt while the record is unavailable').toHaveLength(1);
    await openDeliveriesBucket(nats.jsm);

    // The bucket came back empty: the record starts again, and the receiver gets the job.
    const rec = await waitForFinal(nats, job.requestId, 30_000);
    expect(rec.state).toBe('delivered');
    expect(receiver.received.map((r) => r.headers['x-request-id'])).toEqual([job.requestId, job.requestId]);
  });
});
