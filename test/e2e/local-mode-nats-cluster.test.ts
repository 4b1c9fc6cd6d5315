/**
 * `apphost dev` against an external 3-node NATS cluster (NATS_URL with every server): its streams and
 * buckets get three replicas, and async runs with webhooks keep working when one NATS node is killed.
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUNS_BUCKET, RUNS_STREAM, WEBHOOKS_STREAM } from '../../src/shared/contracts/messaging.ts';
import { natsServers } from '../../src/shared/nats/url.ts';
import { type NatsCluster, startNatsCluster } from '../harness/nats-cluster.ts';
import { startWatchdog, type Watchdog } from '../harness/watchdog.ts';
import { type DevProcess, REPO, startDevProcess, until } from './dev-process.ts';

/** Bound on a run being accepted and its webhook arriving, through a NATS failover. */
const RUN_TIMEOUT_MS = 120_000;
/** Bound on one accept attempt (the gateway retries its publish for 5 s). */
const ACCEPT_ATTEMPT_TIMEOUT_MS = 30_000;

describe('apphost dev with an external NATS cluster (e2e)', () => {
  let dir: string;
  let dog: Watchdog;
  let cluster: NatsCluster;
  let nc: NatsConnection;
  let dev: DevProcess;
  let receiver: Server;
  let hookUrl: string;
  const delivered = new Set<string>();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'apphost-e2e-cluster-'));
    dog = startWatchdog(join(dir, 'pids'));
    cpSync(join(REPO, 'examples', 'apps'), join(dir, 'apps'), { recursive: true });
    cluster = await startNatsCluster({ dir: join(dir, 'nats'), onPid: (n, pid) => dog.track(n, pid) });
    nc = await connect({ servers: natsServers(cluster.url), maxReconnectAttempts: -1 });
    receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        delivered.add(String(req.headers['x-request-id']));
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    hookUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
    dev = await startDevProcess({
      appsDir: join(dir, 'apps'),
      stateDir: join(dir, 'state'),
      credentialsFile: join(dir, 'credentials.json'),
      env: { NATS_URL: cluster.url },
    });
    if (dev.child.pid !== undefined) dog.track('apphost-dev', dev.child.pid);
  });

  afterAll(async () => {
    dev?.kill();
    await nc?.close();
    await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
    await cluster?.stop();
    dog?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** An async run with a webhook, accepted (retrying the accept while NATS fails over); its run id. */
  const runAsync = async (): Promise<string> =>
    until(
      'a 202 for an async run',
      async () => {
        const res = await fetch(
          `${dev.creds.api_url}/v4/${dev.creds.project_id}/hello/run?async=true&webhookEndpoint=${encodeURIComponent(hookUrl)}`,
          {
            method: 'POST',
            headers: { authorization: `Bearer ${dev.creds.run_token}`, 'content-type': 'application/json' },
            body: '{"name":"cluster"}',
            signal: AbortSignal.timeout(ACCEPT_ATTEMPT_TIMEOUT_MS),
          },
        );
        return res.status === 202 ? ((await res.json()) as { run_id: string }).run_id : undefined;
      },
      RUN_TIMEOUT_MS,
    );

  it('keeps three replicas of its streams and buckets', async () => {
    const jsm = await jetstreamManager(nc, { timeout: 30_000 });
    for (const s of [RUNS_STREAM, WEBHOOKS_STREAM, `KV_${RUNS_BUCKET}`])
      expect((await jsm.streams.info(s)).config.num_replicas, s).toBe(3);
  });

  it('runs async work with webhooks before and after a NATS node is killed', async () => {
    const before = await runAsync();
    await until('the first webhook', () => delivered.has(before), RUN_TIMEOUT_MS);
    const victim = cluster.nodes[0];
    victim?.signal('SIGKILL');
    await victim?.exited();
    const after = await runAsync();
    await until('the webhook after the node loss', () => delivered.has(after), RUN_TIMEOUT_MS);
  });
});
