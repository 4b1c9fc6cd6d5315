/**
 * The chart's bundled NATS on a real cluster: three servers clustered over routes, apphost's streams and
 * buckets at three replicas, and an async run with a webhook accepted and delivered while one NATS pod
 * is deleted (the StatefulSet brings it back; the cluster keeps its quorum).
 */
import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../harness/process.ts';
import { clusterKubeConfig, createProject, exposeToPods, kubectl, PLATFORM_NAMESPACE } from './fixture.ts';
import { call, deployConfigMapApp, firstOk, runToken, serviceAccountToken } from './user.ts';

/** Bound on the StatefulSet being whole again, and on a run's webhook arriving through a failover. */
const CONVERGE_MS = 120_000;

/** A NATS server's monitoring endpoint through the API server's pod proxy. */
async function monitor(pod: string, path: string): Promise<unknown> {
  const out = await kubectl(
    'get',
    '--raw',
    `/api/v1/namespaces/${PLATFORM_NAMESPACE}/pods/${pod}:8222/proxy${path}`,
  );
  return JSON.parse(out);
}

describe('bundled NATS as a JetStream cluster', () => {
  let project: string;
  let token: string;

  beforeAll(async () => {
    project = await createProject(clusterKubeConfig());
    token = await runToken(project, await serviceAccountToken(project));
    await deployConfigMapApp(project, 'slow', 'slow');
    await firstOk(token, `/v4/${project}/slow/run`, { seconds: 0 });
  });

  afterAll(async () => {
    await kubectl('delete', 'namespace', project, '--wait=false').catch(() => {});
  });

  it('runs three clustered servers and keeps apphost streams at three replicas', async () => {
    const jsz = (await monitor('apphost-nats-0', '/jsz?streams=true&config=true')) as {
      meta_cluster?: { cluster_size?: number };
      account_details?: Array<{
        stream_detail?: Array<{ name: string; config?: { num_replicas?: number } }>;
      }>;
    };
    expect(jsz.meta_cluster?.cluster_size).toBe(3);
    const streams = (jsz.account_details ?? []).flatMap((a) => a.stream_detail ?? []);
    for (const name of ['RUNS', 'WEBHOOKS', 'KV_apphost_runs', 'KV_apphost_webhook_deliveries'])
      expect(streams.find((s) => s.name === name)?.config?.num_replicas, name).toBe(3);
  });

  it("runs each server with the chart's Go runtime settings (a memory limit below the pod's)", async () => {
    const varz = (await monitor('apphost-nats-1', '/varz')) as { gomemlimit?: number };
    expect(varz.gomemlimit).toBe(900 * 1024 * 1024);
  });

  it('accepts and delivers an async run while a NATS pod is deleted', async () => {
    const delivered = new Set<string>();
    const receiver = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        delivered.add(String(req.headers['x-request-id']));
        res.writeHead(200).end();
      });
    });
    const exposed = await exposeToPods(receiver);
    try {
      await kubectl('delete', 'pod', '-n', PLATFORM_NAMESPACE, 'apphost-nats-0', '--wait=false');
      let runId: string | undefined;
      await waitFor(
        'an async run accepted during the NATS failover',
        async () => {
          const res = await call(
            token,
            `/v4/${project}/slow/run?async=true&webhookEndpoint=${encodeURIComponent(`${exposed.url}/hook`)}`,
            { seconds: 0, label: 'failover' },
          );
          if (res.statusCode !== 202) {
            await res.body.dump();
            return false;
          }
          runId = ((await res.body.json()) as { run_id: string }).run_id;
          return true;
        },
        CONVERGE_MS,
        500,
      );
      await waitFor('its webhook', async () => delivered.has(runId as string), CONVERGE_MS, 250);
      await waitFor(
        'the NATS StatefulSet whole again',
        async () =>
          (
            await kubectl(
              'get',
              'statefulset',
              '-n',
              PLATFORM_NAMESPACE,
              'apphost-nats',
              '-o',
              'jsonpath={.status.readyReplicas}',
            )
          ).trim() === '3',
        CONVERGE_MS,
        1_000,
      );
    } finally {
      await exposed.close();
    }
  });
});
