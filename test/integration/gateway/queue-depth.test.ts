/**
 * The gateway's apphost_runs_queue_depth gauge against a real JetStream: each scrape reads the RUNS
 * stream's message count (one stream-info request through a manager made once: gateway.ts). No run
 * worker here, so every accepted run stays in the stream.
 */
import type { Server } from 'node:http';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGateway, type Gateway } from '../../../src/gateway/gateway.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../../../src/gateway/settings.ts';
import { ensureRunsInfrastructure } from '../../../src/runs/store.ts';
import { RUNS_STREAM } from '../../../src/shared/contracts/messaging.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { createRunTokenVerifier, generateSigningKey, issueRunToken } from '../../../src/shared/run-tokens.ts';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { closeServer, listen, resolvedApp, staticResolver } from './helpers.ts';

const P = 'proj-depth';

let nats: NatsServer;
let nc: NatsConnection;
let gateway: Gateway;
let server: Server;
let base: string;
let token: string;
const registry = new Registry();

/** The gauge's value in this scrape of the gateway's registry. */
const depth = async () => {
  const m = /^apphost_runs_queue_depth (\d+)$/m.exec(await registry.metrics());
  return m ? Number(m[1]) : undefined;
};
const accept = async (n: number) => {
  for (let i = 0; i < n; i++) {
    const res = await request(`${base}/v4/${P}/hello/echo?async=true`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{}',
    });
    await res.body.text();
    expect(res.statusCode).toBe(202);
  }
};

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
  await ensureRunsInfrastructure(await jetstreamManager(nc));
  const keys = { keys: [await generateSigningKey()] };
  token = await issueRunToken(keys, P, new Date(Date.now() + 3600_000));
  const resolver = staticResolver([]);
  // Never called: an async run is only queued here.
  resolver.apps.push(resolvedApp(P, 'hello', 'http://127.0.0.1:9', { functions: ['echo'] }));
  gateway = createGateway({
    resolver,
    verifyRunToken: createRunTokenVerifier(() => keys),
    nc,
    secretBox: createSecretBox('test-platform-key-0123456789'),
    log: silentLogger(),
    registry,
    settings: DEFAULT_GATEWAY_SETTINGS,
  });
  const l = await listen(gateway.callback());
  server = l.server;
  base = l.url;
});

afterAll(async () => {
  if (server) await closeServer(server);
  await gateway?.close();
  await nc?.close().catch(() => undefined);
  await nats?.stop();
});

describe('apphost_runs_queue_depth', () => {
  it("is the RUNS stream's message count at every scrape, and keeps its last value once NATS is gone", async () => {
    expect(await depth()).toBe(0);
    await accept(3);
    expect(await depth()).toBe(3);
    await accept(2);
    // A later scrape asks again (the manager is kept, the count is not).
    expect(await depth()).toBe(5);
    expect((await (await jetstreamManager(nc)).streams.info(RUNS_STREAM)).state.messages).toBe(5);
    await nats.stop();
    // The stream-info request fails within QUEUE_DEPTH_TIMEOUT_MS: the scrape answers, the gauge as it was.
    expect(await depth()).toBe(5);
  });
});
