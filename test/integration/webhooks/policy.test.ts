/** The default SSRF policy, with the real dispatcher, a real NATS and a real receiver on loopback. */
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/shared/log.ts';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { createWebhookDispatcher, type WebhookDispatcher } from '../../../src/webhooks/dispatcher.ts';
import { DEFAULT_WEBHOOK_SETTINGS } from '../../../src/webhooks/settings.ts';
import {
  makeJob,
  publish,
  type Receiver,
  sleep,
  startReceiver,
  startWebhookNats,
  type WebhookNats,
  waitForFinal,
} from './helpers.ts';

let nats: WebhookNats;
let dispatcher: WebhookDispatcher;
let receiver: Receiver;
const registry = new Registry();

beforeAll(async () => {
  nats = await startWebhookNats();
  receiver = await startReceiver(() => ({ status: 200 }));
  dispatcher = createWebhookDispatcher({
    nc: nats.nc,
    secretBox: createSecretBox('policy-test-platform-key'),
    log: silentLogger(),
    registry,
    settings: { ...DEFAULT_WEBHOOK_SETTINGS, retryDelayMs: 100, pullExpiresMs: 2_000 },
    deliveriesKv: nats.kv,
    // "rebind.test" answers with a public address first, then loopback: refused as a whole.
    // "nat64.test" answers with the NAT64 form of the metadata address.
    resolveHost: async (host) =>
      host === 'rebind.test'
        ? [
            { address: '93.184.216.34', family: 4 },
            { address: '127.0.0.1', family: 4 },
          ]
        : host === 'nat64.test'
          ? [{ address: '64:ff9b::a9fe:a9fe', family: 6 }]
          : [{ address: '127.0.0.1', family: 4 }],
  });
  await dispatcher.start();
});

afterAll(async () => {
  await dispatcher?.stop(10_000);
  await receiver?.close();
  await nats?.close();
});

describe('default webhook policy', () => {
  it.each([
    ['a loopback address', () => receiver.url],
    ['a name resolving to loopback', () => `http://localhost:${receiver.port}/hook`],
    ['a name with any internal address', () => `http://rebind.test:${receiver.port}/hook`],
    ['the metadata address', () => 'http://169.254.169.254/latest/meta-data/'],
    ['an IPv4-mapped IPv6 loopback', () => `http://[::ffff:127.0.0.1]:${receiver.port}/hook`],
    ['the NAT64 form of the metadata address', () => 'http://[64:ff9b::a9fe:a9fe]/latest/meta-data/'],
    ['a name resolving to the NAT64 form of the metadata address', () => 'http://nat64.test/hook'],
    ['the 6to4 form of loopback', () => `http://[2002:7f00:1::1]:${receiver.port}/hook`],
  ])('refuses %s: one attempt, permanent, receiver untouched', async (_name, endpoint) => {
    const job = makeJob({ endpoint: endpoint() });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId);
    expect(rec.state).toBe('failed');
    expect(rec.attempts).toEqual([expect.objectContaining({ attempt: 1, outcome: 'refused_by_policy' })]);
    expect(rec.attempts[0]?.error).toMatch(/refuses/);
    await sleep(300);
    expect(receiver.received).toHaveLength(0);
  });

  it('counts refusals in the metrics', async () => {
    expect(await registry.metrics()).toMatch(
      /apphost_webhook_attempts_total\{outcome="refused_by_policy"\} 8\b/,
    );
  });
});
