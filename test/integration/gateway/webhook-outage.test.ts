/**
 * Sync calls while NATS is down: the caller gets its answer, and each call's webhook job is held by
 * the gateway and handed to JetStream once NATS is back — none is lost (the attack lost 41 in one outage).
 */
import type { Server } from 'node:http';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createGateway, type Gateway } from '../../../src/gateway/gateway.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../../../src/gateway/settings.ts';
import { WEBHOOKS_STREAM } from '../../../src/shared/contracts/messaging.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { createRunTokenVerifier, generateSigningKey, issueRunToken } from '../../../src/shared/run-tokens.ts';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { ensureWebhooksStream } from '../../../src/webhooks/stream.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { waitFor } from '../../harness/process.ts';
import {
  closeServer,
  frontGateway,
  frontVerifier,
  type Runtime,
  resolvedApp,
  startRuntime,
  staticResolver,
} from './helpers.ts';

const P = 'proj-outage';
const CALLS = 12;
/** Bound on NATS coming back and the held jobs reaching the stream. */
const RECOVERY_TIMEOUT_MS = 60_000;

let nats: NatsServer;
let nc: NatsConnection;
let runtime: Runtime;
let gateway: Gateway;
let server: Server;
let base: string;
let token: string;
const registry = new Registry();

beforeAll(async () => {
  const keys = { keys: [await generateSigningKey()] };
  [nats, runtime] = await Promise.all([startNats(), startRuntime()]);
  nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 200 });
  await ensureWebhooksStream(await jetstreamManager(nc));
  token = await issueRunToken(keys, P, new Date(Date.now() + 3600_000));
  const resolver = staticResolver([resolvedApp(P, 'hello', runtime.url)]);
  const verifier = frontVerifier(createRunTokenVerifier(() => keys));
  const settings = { ...DEFAULT_GATEWAY_SETTINGS, webhookPublishTimeoutMs: 1_000 };
  gateway = createGateway({
    resolver,
    verifyRunToken: verifier,
    nc,
    secretBox: createSecretBox('outage-test-platform-key-0123'),
    log: silentLogger(),
    registry,
    settings,
  });
  ({ server, url: base } = await frontGateway(gateway, { resolver, verifier, settings }));
});

afterAll(async () => {
  if (server) await closeServer(server);
  await gateway?.close();
  await nc?.close();
  await runtime?.proc.stop(5_000);
  await nats?.stop();
});

const storedJobs = async () =>
  (await (await jetstreamManager(nc, { timeout: 2_000 })).streams.info(WEBHOOKS_STREAM)).state.messages;

it(
  'holds the webhook jobs of sync calls made while NATS is down and queues every one when it is back',
  async () => {
    await nats.stop({ keepStore: true });
    const hook = encodeURIComponent('https://receiver.example/hook');
    const answers = await Promise.all(
      Array.from({ length: CALLS }, async (_, i) => {
        const res = await request(`${base}/v4/${P}/hello/echo?webhookEndpoint=${hook}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ i }),
        });
        await res.body.text();
        return res.statusCode;
      }),
    );
    expect(answers).toEqual(Array(CALLS).fill(200));
    await waitFor('every job held', async () => gateway.pendingWebhooks() === CALLS, RECOVERY_TIMEOUT_MS);

    await nats.restart();
    await waitFor(
      'every held job stored in WEBHOOKS, once',
      async () => gateway.pendingWebhooks() === 0 && (await storedJobs()) === CALLS,
      RECOVERY_TIMEOUT_MS,
      250,
    );
    const metrics = await registry.metrics();
    expect(metrics).toMatch(new RegExp(`apphost_gateway_webhook_jobs_total\\{outcome="held"\\} ${CALLS}\\b`));
    expect(metrics).not.toMatch(/outcome="dropped"/);
  },
  3 * RECOVERY_TIMEOUT_MS,
);

it('does not hold a job NATS can never take (over max_payload): not forwarded, counted, logged', async () => {
  const hook = encodeURIComponent('https://receiver.example/hook');
  // Under APPHOST_WEBHOOK_MAX_BODY_BYTES (768 KiB), but base64 plus the envelope is over 1 MiB.
  const res = await request(`${base}/v4/${P}/hello/echo?webhookEndpoint=${hook}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ s: 'x'.repeat(786_300) }),
  });
  await res.body.text();
  expect(res.statusCode).toBe(200);
  expect(gateway.pendingWebhooks()).toBe(0);
  expect(await registry.metrics()).toMatch(/apphost_gateway_webhook_jobs_total\{outcome="too_large"\} 1\b/);
});
