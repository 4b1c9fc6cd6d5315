/**
 * One set of body rules for a Cortex app: what the real runtime refuses with 400, the gateway refuses
 * with 400 too — sync, and async before anything is queued (no 202 for a run that can only fail).
 */
import type { Server } from 'node:http';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from '../../../src/gateway/body.ts';
import { createGateway, type Gateway } from '../../../src/gateway/gateway.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../../../src/gateway/settings.ts';
import { ensureRunsInfrastructure } from '../../../src/runs/store.ts';
import { RUNS_STREAM } from '../../../src/shared/contracts/messaging.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { createRunTokenVerifier, generateSigningKey, issueRunToken } from '../../../src/shared/run-tokens.ts';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { ensureWebhooksStream } from '../../../src/webhooks/stream.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import {
  closeServer,
  frontGateway,
  frontVerifier,
  type Runtime,
  resolvedApp,
  startRuntime,
  staticResolver,
} from './helpers.ts';

const P = 'proj-body';
let nats: NatsServer;
let nc: NatsConnection;
let runtime: Runtime;
let gateway: Gateway;
let server: Server;
let base: string;
let token: string;

beforeAll(async () => {
  const keys = { keys: [await generateSigningKey()] };
  [nats, runtime] = await Promise.all([startNats(), startRuntime()]);
  nc = await connect({ servers: nats.url });
  const jsm = await jetstreamManager(nc);
  await ensureRunsInfrastructure(jsm);
  await ensureWebhooksStream(jsm);
  token = await issueRunToken(keys, P, new Date(Date.now() + 3600_000));
  const resolver = staticResolver([resolvedApp(P, 'hello', runtime.url, { functions: ['echo'] })]);
  const verifier = frontVerifier(createRunTokenVerifier(() => keys));
  gateway = createGateway({
    resolver,
    verifyRunToken: verifier,
    nc,
    secretBox: createSecretBox('body-rules-platform-key-0123'),
    log: silentLogger(),
    registry: new Registry(),
    settings: DEFAULT_GATEWAY_SETTINGS,
  });
  ({ server, url: base } = await frontGateway(gateway, { resolver, verifier }));
});

afterAll(async () => {
  if (server) await closeServer(server);
  await gateway?.close();
  await nc?.close();
  await runtime?.proc.stop(5_000);
  await nats?.stop();
});

async function post(url: string, body: Buffer, headers: Record<string, string> = {}) {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  const text = await res.body.text();
  return { status: res.statusCode, text };
}
const viaRuntime = (body: Buffer) => post(`${runtime.url}/echo`, body);
const viaGateway = (body: Buffer, async: boolean) =>
  post(`${base}/v4/${P}/hello/echo${async ? '?async=true' : ''}`, body, { authorization: `Bearer ${token}` });
const queued = async () => (await (await jetstreamManager(nc)).streams.info(RUNS_STREAM)).state.messages;

const nested = (levels: number) => `{"a":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;

describe('a body the runtime refuses', () => {
  it.each([
    ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])],
    ['1,000 levels of nesting', Buffer.from(nested(1000))],
    ['one level more than the limit', Buffer.from(nested(MAX_JSON_DEPTH + 1))],
    ['an out-of-range number', Buffer.from('{"name":1e999999}')],
    ['NaN', Buffer.from('{"name":NaN}')],
  ])('%s: runtime 400, gateway 400 sync and async, nothing queued', async (_name, body) => {
    expect((await viaRuntime(body)).status).toBe(400);
    const before = await queued();
    expect((await viaGateway(body, false)).status).toBe(400);
    const async = await viaGateway(body, true);
    expect(async.status).toBe(400);
    expect(JSON.parse(async.text).error.code).toBe('invalid_body');
    expect(await queued()).toBe(before);
  });

  it('names the argument that holds the out-of-range number, in both', async () => {
    const body = Buffer.from('{"ok":1,"name":1e999999}');
    expect((await viaRuntime(body)).text).toContain("argument 'name'");
    expect((await viaGateway(body, true)).text).toContain("argument 'name'");
  });
});

describe('a body at the limits', () => {
  it.each([
    ['exactly the depth limit', Buffer.from(nested(MAX_JSON_DEPTH))],
    ['the largest double', Buffer.from('{"a":1.7976931348623157e308}')],
  ])('%s: runtime 200, gateway 200 sync and 202 async', async (_name, body) => {
    expect((await viaRuntime(body)).status).toBe(200);
    expect((await viaGateway(body, false)).status).toBe(200);
    expect((await viaGateway(body, true)).status).toBe(202);
  });
});
