/** Shared pieces of the webhook integration tests: a scripted receiver, a NATS + stream, job publishing. */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { openSync, readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { WebhookDeliveryRecord, WebhookJob } from '../../../src/shared/contracts/messaging.ts';
import type { SecretBox } from '../../../src/shared/secretbox.ts';
import { createDeliveryStore } from '../../../src/webhooks/deliveries.ts';
import { publishWebhookJob } from '../../../src/webhooks/publish.ts';
import { ensureWebhooksConsumer, openDeliveriesBucket } from '../../../src/webhooks/stream.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { freePort, waitFor } from '../../harness/process.ts';

export interface Received {
  n: number;
  at: number;
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** What the receiver does with its n-th request (1-based): answer with a status, or never answer. */
export type Script = (
  n: number,
) => { status: number; headers?: Record<string, string>; delayMs?: number; endless?: boolean } | 'hang';

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** When the receiver saw each response's connection close (ms since epoch), by request number. */
  closedAt: Map<number, number>;
  close(): Promise<void>;
}

export async function startReceiver(script: Script): Promise<Receiver> {
  const received: Received[] = [];
  const closedAt = new Map<number, number>();
  const hanging: ServerResponse[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const n = received.length + 1;
      received.push({
        n,
        at: Date.now(),
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks),
      });
      res.on('close', () => closedAt.set(n, Date.now()));
      const what = script(n);
      if (what === 'hang') {
        hanging.push(res);
        return;
      }
      const answer = () => {
        if (what.endless) {
          // An answer that never ends: the dispatcher must cut it off, not read it forever.
          res.writeHead(what.status, what.headers ?? {});
          const chunk = Buffer.alloc(16 * 1024, 'x');
          const timer = setInterval(() => res.write(chunk), 5);
          res.on('close', () => clearInterval(timer));
          hanging.push(res);
          return;
        }
        res.writeHead(what.status, what.headers ?? {}).end(what.status === 304 ? undefined : 'ok');
      };
      if (what.delayMs) setTimeout(answer, what.delayMs);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    closedAt,
    close: () =>
      new Promise((resolve) => {
        for (const r of hanging) r.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export interface WebhookNats {
  server: NatsServer;
  nc: NatsConnection;
  jsm: JetStreamManager;
  js: JetStreamClient;
  kv: KV;
  record(requestId: string): Promise<WebhookDeliveryRecord | undefined>;
  close(): Promise<void>;
}

/** A private nats-server (the stream names are fixed constants) with the WEBHOOKS objects created. */
export async function startWebhookNats(): Promise<WebhookNats> {
  const server = await startNats();
  const nc = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  await ensureWebhooksConsumer(jsm);
  const kv = await openDeliveriesBucket(jsm);
  const store = createDeliveryStore(kv);
  return {
    server,
    nc,
    jsm,
    js: jetstream(nc),
    kv,
    record: (id) => store.get(id),
    async close() {
      await nc.close();
      await server.stop();
    },
  };
}

export function makeJob(opts: {
  endpoint: string;
  body?: string;
  secret?: string;
  secretBox?: SecretBox;
  status?: number;
}): WebhookJob {
  const body = opts.body ?? '{"result":"hello"}';
  return {
    v: 1,
    requestId: `req-${randomUUID()}`,
    projectId: 'proj',
    appName: 'app',
    target: {
      endpoint: opts.endpoint,
      ...(opts.secret && opts.secretBox ? { sealedSecret: opts.secretBox.seal(opts.secret) } : {}),
    },
    response: {
      status: opts.status ?? 200,
      contentType: 'application/json',
      bodyBase64: Buffer.from(body).toString('base64'),
    },
    runStatus: 'success',
    completedAt: new Date().toISOString(),
  };
}

export async function publish(js: JetStreamClient, job: WebhookJob): Promise<void> {
  await publishWebhookJob(js, job);
}

/** Waits until the delivery record for `requestId` is no longer pending. */
export async function waitForFinal(
  nats: WebhookNats,
  requestId: string,
  timeoutMs = 30_000,
): Promise<WebhookDeliveryRecord> {
  let rec: WebhookDeliveryRecord | undefined;
  await waitFor(
    `delivery ${requestId} to finish`,
    async () => {
      rec = await nats.record(requestId);
      return rec !== undefined && rec.state !== 'pending';
    },
    timeoutMs,
    50,
  );
  return rec as WebhookDeliveryRecord;
}

/** Gaps in ms between consecutive requests a receiver saw. */
export const gaps = (r: Received[]) => r.slice(1).map((x, i) => x.at - (r[i] as Received).at);

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Generous bound for a child dispatcher to start (2 busy cores). */
export const CHILD_START_TIMEOUT_MS = 60_000;

export interface Child {
  proc: ChildProcess;
  opsPort: number;
  logFile: string;
}

/**
 * The real dispatcher entry (`main(env)`) as a child process, spawned directly (not through the
 * harness watchdog) so a SIGKILL hits the dispatcher itself. Resolves once /readyz answers 200.
 */
export async function startDispatcherProcess(opts: {
  name: string;
  natsUrl: string;
  platformKey: string;
  logDir: string;
  /** Every child is pushed here, for the caller's afterAll to kill. */
  children: ChildProcess[];
  env?: Record<string, string>;
}): Promise<Child> {
  const opsPort = await freePort();
  const logFile = join(opts.logDir, `${opts.name}.log`);
  const fd = openSync(logFile, 'a');
  const proc = spawn(process.execPath, [new URL('./dispatcher-entry.ts', import.meta.url).pathname], {
    env: {
      ...process.env,
      NATS_URL: opts.natsUrl,
      APPHOST_PLATFORM_KEY: opts.platformKey,
      APPHOST_OPS_PORT: String(opsPort),
      APPHOST_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8,::1/128',
      APPHOST_WEBHOOK_PULL_EXPIRES_MS: '2000',
      APPHOST_WEBHOOK_STOP_BOUND_MS: '5000',
      APPHOST_LOG_LEVEL: 'info',
      ...opts.env,
    },
    stdio: ['ignore', fd, fd],
  });
  opts.children.push(proc);
  await waitFor(
    `${opts.name} /readyz`,
    async () => {
      if (proc.exitCode !== null) throw new Error(`${opts.name} exited: ${readFileSync(logFile, 'utf8')}`);
      return (await fetch(`http://127.0.0.1:${opsPort}/readyz`)).ok;
    },
    CHILD_START_TIMEOUT_MS,
  );
  return { proc, opsPort, logFile };
}

export async function kill(c: Child): Promise<void> {
  if (c.proc.exitCode !== null || c.proc.signalCode !== null) return;
  const exited = new Promise((r) => c.proc.once('exit', r));
  c.proc.kill('SIGKILL');
  await exited;
}
