/**
 * Streams and buckets on a real 3-node JetStream cluster: created with min(3, cluster size) replicas,
 * an R1 stream from before (a single-server install, or an older version) is raised to R3 in place
 * with its data, and an explicit setting can lower it again.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRunsInfrastructure } from '../../../src/runs/infrastructure.ts';
import { RUNS_BUCKET, RUNS_STREAM, WEBHOOKS_STREAM } from '../../../src/shared/contracts/messaging.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { clusterSize, type Replicas, resolveReplicas } from '../../../src/shared/nats/replicas.ts';
import { retryJetStreamSetup } from '../../../src/shared/nats/setup.ts';
import { natsServers } from '../../../src/shared/nats/url.ts';
import { ensureWebhooksConsumer, openDeliveriesBucket } from '../../../src/webhooks/stream.ts';
import { type NatsCluster, startNatsCluster } from '../../harness/nats-cluster.ts';
import { startWatchdog, type Watchdog } from '../../harness/watchdog.ts';

/** Bound on one JetStream API call: stream updates on a loaded 3-node cluster take a while. */
const JS_TIMEOUT_MS = 60_000;
/**
 * A replica change, ensured as a piece does at start: each attempt with a bounded API call, retried
 * within a bound (src/shared/nats/setup.ts) — right after a stream goes R1 → R3 its consumer may not
 * answer until its new Raft group has a leader (once more than a minute on a loaded machine in CI).
 */
const ATTEMPT_TIMEOUT_MS = 10_000;
const SETUP_BOUND_MS = 150_000;
const asAPieceDoes = <T>(what: string, step: (jsm: JetStreamManager) => Promise<T>) =>
  retryJetStreamSetup(what, async () => step(await jetstreamManager(nc, { timeout: ATTEMPT_TIMEOUT_MS })), {
    boundMs: SETUP_BOUND_MS,
    log: silentLogger(),
  });
let dir: string;
let dog: Watchdog;
let cluster: NatsCluster;
let nc: NatsConnection;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'apphost-replicas-'));
  dog = startWatchdog(join(dir, 'pids'));
  cluster = await startNatsCluster({ dir: join(dir, 'cluster'), onPid: (n, pid) => dog.track(n, pid) });
  nc = await connect({ servers: natsServers(cluster.url) });
});

afterAll(async () => {
  await nc?.close();
  await cluster?.stop();
  dog?.stop();
  if (dir && !process.env.APPHOST_TEST_KEEP_DIRS) rmSync(dir, { recursive: true, force: true });
});

const replicasOf = async (stream: string) =>
  (await (await jetstreamManager(nc, { timeout: JS_TIMEOUT_MS })).streams.info(stream)).config.num_replicas;

describe('replicas on a 3-node cluster', () => {
  it('sees the cluster through NATS_URL with several servers', () => {
    expect(clusterSize(nc)).toBe(3);
    expect(resolveReplicas('auto', nc)).toEqual({ count: 3, lower: false });
  });

  it(
    'raises an R1 stream and bucket from before to R3 with their data, and lowers only when told',
    async () => {
      const jsm = await jetstreamManager(nc, { timeout: JS_TIMEOUT_MS });
      // As an older version (or a single-server install) left them: one copy.
      const kv = await ensureRunsInfrastructure(jsm);
      // What the dispatcher ensures: the WEBHOOKS stream under its consumer, and the deliveries bucket.
      const ensureWebhooks = async (m: JetStreamManager, r?: Replicas) => {
        await ensureWebhooksConsumer(m, r);
        await openDeliveriesBucket(m, r);
      };
      await ensureWebhooks(jsm);
      expect(await replicasOf(RUNS_STREAM)).toBe(1);
      await jetstream(nc).publish('apphost.runs.p.a', 'queued-before-upgrade', { msgID: 'r1' });
      await kv.put('p.a.r1', 'record-before-upgrade');

      const auto = resolveReplicas('auto', nc);
      await asAPieceDoes('raising the runs stream and bucket', (m) => ensureRunsInfrastructure(m, auto));
      await asAPieceDoes('raising the webhooks stream, consumer and bucket', (m) => ensureWebhooks(m, auto));
      for (const s of [RUNS_STREAM, `KV_${RUNS_BUCKET}`, WEBHOOKS_STREAM, 'KV_apphost_webhook_deliveries'])
        expect(await replicasOf(s), s).toBe(3);
      expect((await jsm.streams.info(RUNS_STREAM)).state.messages).toBe(1);
      expect(
        (
          await (await new Kvm(jetstream(nc, { timeout: JS_TIMEOUT_MS })).open(RUNS_BUCKET)).get('p.a.r1')
        )?.string(),
      ).toBe('record-before-upgrade');

      // The default never lowers; an explicit setting does.
      await ensureRunsInfrastructure(jsm, {
        count: 1,
        lower: false,
      });
      expect(await replicasOf(RUNS_STREAM)).toBe(3);
      await ensureRunsInfrastructure(jsm, resolveReplicas(2, nc));
      expect(await replicasOf(RUNS_STREAM)).toBe(2);
    },
    6 * JS_TIMEOUT_MS,
  );
});
