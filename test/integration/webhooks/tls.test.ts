/**
 * HTTPS delivery through the real dispatcher process: the connection is pinned to the checked address
 * while TLS still verifies the certificate against the endpoint's name (SNI and Host are the name).
 * The test CA reaches the child through NODE_EXTRA_CA_CERTS, as an operator's private CA would.
 */

import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  makeJob,
  publish,
  startDispatcherProcess,
  startWebhookNats,
  type WebhookNats,
  waitForFinal,
} from './helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'apphost-webhook-tls-'));
const children: ChildProcess[] = [];
let nats: WebhookNats;
let server: Server;
let port = 0;
const seen: Array<{ sni: string | false | null; host: string | undefined; body: string }> = [];

beforeAll(async () => {
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  );
  server = createServer(
    { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({
          sni: (req.socket as TLSSocket).servername,
          host: req.headers.host,
          body: Buffer.concat(chunks).toString('utf8'),
        });
        res.writeHead(200).end();
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const a = server.address();
  port = typeof a === 'object' && a ? a.port : 0;
  nats = await startWebhookNats();
  await startDispatcherProcess({
    name: 'tls',
    natsUrl: nats.server.url,
    platformKey: 'tls-test-platform-key-0123456',
    logDir: dir,
    children,
    env: { NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem'), APPHOST_WEBHOOK_RETRY_DELAY_MS: '100' },
  });
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await new Promise<void>((resolve) => {
    if (!server) return resolve();
    server.close(() => resolve());
    server.closeAllConnections();
  });
  await nats?.close();
  if (!process.env.APPHOST_TEST_KEEP_DIRS) rmSync(dir, { recursive: true, force: true });
});

describe('https endpoints', () => {
  it('delivers to https://localhost with SNI and Host set to the name', async () => {
    const job = makeJob({ endpoint: `https://localhost:${port}/hook`, body: '{"tls":true}' });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId, 60_000);
    expect(rec.attempts.map((a) => [a.outcome, a.status])).toEqual([['success', 200]]);
    expect(seen).toEqual([{ sni: 'localhost', host: `localhost:${port}`, body: '{"tls":true}' }]);
  });

  it('still verifies the certificate: a name it does not cover is a network error, retried', async () => {
    const job = makeJob({ endpoint: `https://127.0.0.1:${port}/hook` });
    await publish(nats.js, job);
    const rec = await waitForFinal(nats, job.requestId, 60_000);
    expect(rec.state).toBe('failed');
    expect(rec.attempts.map((a) => a.outcome)).toEqual(['network_error', 'network_error', 'network_error']);
    expect(rec.attempts[0]?.error).toMatch(/altnames|certificate|IP/i);
    expect(seen).toHaveLength(1);
  });
});
