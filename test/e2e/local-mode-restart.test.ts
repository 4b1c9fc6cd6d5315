/**
 * With NATS_URL pointing at a server that outlives `apphost dev`, an accepted async run survives a
 * restart: the run is still executing when the first session stops (its worker hands it back), and the
 * second session's worker runs it again and forwards the result to the webhook.
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNats } from '../harness/nats.ts';
import { type DevProcess, REPO, startDevProcess, until } from './dev-process.ts';

/** Longer than the local worker's stop bound (10 s), so the first session cannot finish it. */
const RUN_SECONDS = 15;

describe('apphost dev with an external NATS (e2e)', () => {
  let dir: string;
  let nats: NatsServer;
  let receiver: Server;
  let receiverUrl: string;
  const deliveries: Array<{ at: number; headers: IncomingHttpHeaders; body: string }> = [];
  const sessions: DevProcess[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'apphost-e2e-restart-'));
    cpSync(join(REPO, 'examples', 'apps'), join(dir, 'apps'), { recursive: true });
    nats = await startNats();
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        deliveries.push({ at: Date.now(), headers: req.headers, body: Buffer.concat(chunks).toString() });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const addr = receiver.address();
    receiverUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}/hook`;
  });

  afterAll(async () => {
    for (const s of sessions) s.kill();
    await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const start = async (n: number) => {
    const s = await startDevProcess({
      appsDir: join(dir, 'apps'),
      stateDir: join(dir, 'state'),
      credentialsFile: join(dir, `credentials-${n}.json`),
      env: { NATS_URL: nats.url },
    });
    sessions.push(s);
    return s;
  };

  it('delivers the result of a run accepted by the previous session', async () => {
    const first = await start(1);
    expect(first.output()).toContain('(NATS_URL)');
    const { creds } = first;
    const res = await fetch(
      `${creds.api_url}/v4/${creds.project_id}/slow/run?async=true&webhookEndpoint=${encodeURIComponent(receiverUrl)}`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${creds.run_token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ seconds: RUN_SECONDS, label: 'survivor' }),
      },
    );
    expect(res.status).toBe(202);
    const { run_id: runId } = (await res.json()) as { run_id: string };
    await until(
      'the run to be executing',
      async () => {
        const r = await fetch(`${creds.base_url}/v2/projects/${creds.project_id}/apps/slow/runs/${runId}`, {
          headers: { authorization: `Bearer ${creds.service_account_token}` },
        });
        return r.status === 200 && ((await r.json()) as { state?: string }).state === 'running'
          ? true
          : undefined;
      },
      30_000,
    );
    expect(await first.stop()).toBe(0);
    const stoppedAt = Date.now();
    expect(deliveries.filter((d) => d.headers['x-request-id'] === runId)).toEqual([]);

    const second = await start(2);
    const delivery = await until(
      'the webhook of the surviving run',
      () => deliveries.find((d) => d.headers['x-request-id'] === runId),
      120_000,
    );
    expect(delivery.at).toBeGreaterThan(stoppedAt);
    expect(delivery.body).toContain('survivor');
    const record = await fetch(
      `${second.creds.base_url}/v2/projects/${second.creds.project_id}/apps/slow/runs/${runId}`,
      { headers: { authorization: `Bearer ${second.creds.service_account_token}` } },
    );
    expect(record.status).toBe(200);
    expect(await record.json()).toMatchObject({ state: 'success' });
    expect(await second.stop()).toBe(0);
  }, 300_000);
});
