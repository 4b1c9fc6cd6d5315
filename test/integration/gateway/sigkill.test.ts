/**
 * Crash safety: SIGKILL the gateway+worker process after it answered 202 and while the function is
 * still running; start it again; the run completes (a second execution: at-least-once) and its
 * webhook is delivered, signed, by the real webhook dispatcher.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { createWriteStream, existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createRunStore, type RunStore } from '../../../src/runs/store.ts';
import { RUNS_BUCKET, type RunRecord } from '../../../src/shared/contracts/messaging.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { generateSigningKey, issueRunToken } from '../../../src/shared/run-tokens.ts';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { createWebhookDispatcher, type WebhookDispatcher } from '../../../src/webhooks/dispatcher.ts';
import { DEFAULT_WEBHOOK_SETTINGS } from '../../../src/webhooks/settings.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { freePort, waitFor } from '../../harness/process.ts';
import { closeServer, listen, REPO_ROOT, type Runtime, startRuntime, tempDir } from './helpers.ts';

const P = 'proj-crash';
const PLATFORM_KEY = 'crash-test-platform-key-0123';
const ACK_WAIT_MS = 2_000;
const START_TIMEOUT_MS = 60_000;
const RUN_WAIT_MS = 60_000;
const NODE = process.execPath;

let nats: NatsServer;
let nc: NatsConnection;
let runtime: Runtime;
let store: RunStore;
let dispatcher: WebhookDispatcher;
let receiver: { server: Server; url: string };
const deliveries: Array<{ headers: Record<string, string | string[] | undefined>; body: string }> = [];
const children: ChildProcess[] = [];
const dir = tempDir('apphost-crash-');

async function startGatewayProcess(
  env: NodeJS.ProcessEnv,
  tag: string,
): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(NODE, [join(REPO_ROOT, 'test/integration/gateway/entry.ts')], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const log = createWriteStream(join(dir, `gateway-${tag}.log`));
  child.stderr?.pipe(log);
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`gateway ${tag} did not start; see ${dir}`)),
      START_TIMEOUT_MS,
    );
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      log.write(d);
      const m = /listening (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.once('exit', (code) => reject(new Error(`gateway ${tag} exited with ${code}; see ${dir}`)));
  });
  return { child, port };
}

beforeAll(async () => {
  [nats, runtime] = await Promise.all([startNats(), startRuntime()]);
  nc = await connect({ servers: nats.url });
  receiver = await listen((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString();
    });
    req.on('end', () => {
      deliveries.push({ headers: req.headers, body });
      res.writeHead(200).end('ok');
    });
  });
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await dispatcher?.stop(5_000);
  if (receiver) await closeServer(receiver.server);
  await nc?.close();
  await runtime?.proc.stop(5_000);
  await nats?.stop();
});

it('a run survives a SIGKILL of the gateway mid-run and its webhook is still delivered', async () => {
  const keys = { keys: [await generateSigningKey()] };
  const keysFile = join(dir, 'run-token-keys.json');
  writeFileSync(keysFile, JSON.stringify(keys));
  const token = await issueRunToken(keys, P, new Date(Date.now() + 3600_000));
  const env = {
    NATS_URL: nats.url,
    APPHOST_LOG_LEVEL: 'info',
    APPHOST_OPS_PORT: '0',
    APPHOST_GATEWAY_PORT: '0',
    APPHOST_GATEWAY_HOST: '127.0.0.1',
    APPHOST_PLATFORM_KEY: PLATFORM_KEY,
    APPHOST_RUN_TOKEN_KEYS_FILE: keysFile,
    APPHOST_RUN_ACK_WAIT_MS: String(ACK_WAIT_MS),
    APPHOST_TEST_APPS: JSON.stringify([
      {
        projectId: P,
        appName: 'hello',
        runtime: 'cortex',
        upstream: runtime.url,
        ready: true,
        gracePeriodSeconds: 60,
      },
    ]),
  };

  const first = await startGatewayProcess(env, 'first');
  const marker = join(dir, 'starts');
  // Every execution blocks until `gate` exists: the first cannot finish before the kill.
  const gate = join(dir, 'gate');
  const secret = 'whsec-crash-test';
  const endpoint = `${receiver.url}/hook`;
  const res = await request(
    `http://127.0.0.1:${first.port}/v4/${P}/hello/gated?async=true&webhookEndpoint=${encodeURIComponent(endpoint)}`,
    {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        'x-webhook-secret': secret,
      },
      body: JSON.stringify({ marker, gate }),
    },
  );
  expect(res.statusCode).toBe(202);
  const runId = (await res.body.json()) as { run_id: string };
  expect(runId.run_id).toBe(res.headers['x-request-id']);

  store = createRunStore(await new Kvm(nc).open(RUNS_BUCKET), nc);
  await waitFor('the first execution started', async () => existsSync(marker), RUN_WAIT_MS);
  first.child.kill('SIGKILL');
  await new Promise((r) => first.child.once('exit', r));
  const mid = await store.get(P, 'hello', runId.run_id);
  expect(mid?.state).toBe('running');

  await startGatewayProcess({ ...env, APPHOST_OPS_PORT: String(await freePort()) }, 'second');
  await waitFor(
    'the run was redelivered and started again',
    async () => readFileSync(marker, 'utf8').trim().split('\n').length === 2,
    RUN_WAIT_MS,
  );
  writeFileSync(gate, '');
  dispatcher = createWebhookDispatcher({
    nc,
    secretBox: createSecretBox(PLATFORM_KEY),
    log: silentLogger(),
    registry: new Registry(),
    settings: { ...DEFAULT_WEBHOOK_SETTINGS, allowCidrs: ['127.0.0.0/8'], pullExpiresMs: 1_000 },
  });
  await dispatcher.start();

  let rec: RunRecord | undefined;
  await waitFor(
    'the run finished after the restart',
    async () => {
      rec = await store.get(P, 'hello', runId.run_id);
      return rec?.state === 'success' || rec?.state === 'failure' || rec?.state === 'timeout';
    },
    RUN_WAIT_MS,
  );
  expect(rec?.state).toBe('success');
  expect(rec?.executions).toBe(2);
  expect(readFileSync(marker, 'utf8').trim().split('\n').length).toBe(2);

  await waitFor('the webhook delivered', async () => deliveries.length > 0, RUN_WAIT_MS);
  const d = deliveries[0];
  expect(d?.headers['x-request-id']).toBe(runId.run_id);
  const ts = String(d?.headers['x-service-webhook-timestamp']);
  const sig = String(d?.headers['x-service-webhook-signature']);
  const expected = createHmac('sha256', secret)
    .update(`${runId.run_id}.${ts}.${d?.body}`, 'utf8')
    .digest('hex');
  expect(sig).toBe(`v1,${expected}`);
  expect(d?.body).toContain('gated');
});
