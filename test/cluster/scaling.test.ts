/**
 * Scaling on the real cluster (issue 13; 20.3): the same scenarios as apphost dev's, against pods —
 * replicaConcurrency held inside the runtime (through the ingress, and with calls sent to each of the
 * chart's two gateway pods directly), pods added under load out to maxReplicas with overlapping calls,
 * back to minReplicas after the cooldown, scale to zero and a cold start through the ingress, an async
 * run waking an app at zero, an App whose main.py raises on import failing held calls with the cause,
 * no failed call when a replica is deleted under load (preStop + retry on another replica), and none
 * across a scale-down under steady load. Durations (cold start, time to scale up) are printed as
 * figures, never asserted. The autoscaler's windows are shortened for the run with the operator's own
 * variables, then restored.
 */
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { AppsV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/apis/v1alpha1/types.ts';
import { binaryPath } from '../harness/binaries.ts';
import { maxOverlap } from '../harness/overlap.ts';
import { freePort, type ManagedProcess, startProcess, waitFor } from '../harness/process.ts';
import {
  clusterKubeConfig,
  createProject,
  helm,
  info,
  kubectl,
  kubectlApply,
  PLATFORM_NAMESPACE,
  PLATFORM_RELEASE,
} from './fixture.ts';
import { CHART, PLATFORM_READY_TIMEOUT_MS } from './platform.ts';
import { call, management, runToken, serviceAccountToken } from './user.ts';

/** Bound on each scaling step (pods scheduled and started on a busy 2-core node). */
const STEP_MS = 150_000;

const TIMED = `import os
import socket
import time


def timed(seconds: float = 1.0):
    start = time.time()
    time.sleep(seconds)
    return {"start": start, "end": time.time(), "host": socket.gethostname()}
`;

const BROKEN = `raise RuntimeError("the model file is missing")
`;

const WINDOWS = [
  { name: 'APPHOST_AUTOSCALER_TICK_MS', value: '500' },
  { name: 'APPHOST_AUTOSCALER_STABLE_WINDOW_MS', value: '5000' },
  { name: 'APPHOST_AUTOSCALER_PANIC_WINDOW_MS', value: '1000' },
  { name: 'APPHOST_AUTOSCALER_REPORT_TTL_MS', value: '3000' },
];

/**
 * Faster load reports; the held-call bounds raised to a step's, since a pod's start on this busy 2-core
 * node may take longer than the defaults allow (the bounds themselves are tested in integration).
 */
const GATEWAY = [
  { name: 'APPHOST_LOAD_REPORT_INTERVAL_MS', value: '500' },
  { name: 'APPHOST_GATEWAY_COLD_START_TIMEOUT_MS', value: String(STEP_MS) },
  { name: 'APPHOST_GATEWAY_QUEUE_TIMEOUT_MS', value: String(STEP_MS) },
];

interface Timed {
  start: number;
  end: number;
  host: string;
}

async function upgrade(setJson: string[]): Promise<void> {
  await helm([
    'upgrade',
    PLATFORM_RELEASE,
    CHART,
    '--namespace',
    PLATFORM_NAMESPACE,
    '--reuse-values',
    ...setJson.flatMap((s) => ['--set-json', s]),
    '--wait',
    `--timeout=${PLATFORM_READY_TIMEOUT_MS / 1000}s`,
  ]);
}

describe('scaling on the real cluster', () => {
  let kc: KubeConfig;
  let project: string;
  let saToken: string;
  let token: string;
  const forwards: ManagedProcess[] = [];

  const app = async (name: string, main: string, scaling: Record<string, number>) => {
    await kubectl('-n', project, 'create', 'configmap', `${name}-code`, `--from-literal=main.py=${main}`);
    await kubectlApply(
      project,
      JSON.stringify({
        apiVersion: 'apphost.dev/v1alpha1',
        kind: 'App',
        metadata: { name },
        spec: { runtime: 'cortex', code: { configMapRef: { name: `${name}-code` } }, scaling },
      }),
    );
  };
  const getApp = async (name: string) =>
    (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      group: 'apphost.dev',
      version: 'v1alpha1',
      namespace: project,
      plural: 'apps',
      name,
    })) as App;
  const readyPods = async (name: string) =>
    (await kc.makeApiClient(AppsV1Api).readNamespacedDeployment({ namespace: project, name })).status
      ?.readyReplicas ?? 0;
  const parse = (status: number, text: string) => ({
    status,
    text,
    body: status === 200 ? (JSON.parse(text) as Timed) : undefined,
  });
  /** A call to `<app>/timed` through the ingress, as a user makes it. */
  const timed = async (name: string, seconds: number) => {
    const res = await call(token, `/v4/${project}/${name}/timed`, { seconds });
    return parse(res.statusCode, await res.body.text());
  };
  /** The same call sent to one gateway pod (a port-forward), bypassing the ingress's choice. */
  const timedVia = async (port: number, name: string, seconds: number) => {
    const res = await request(`http://127.0.0.1:${port}/v4/${project}/${name}/timed`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ seconds }),
    });
    return parse(res.statusCode, await res.body.text());
  };
  /**
   * For a failure: each refused call's error, the app's EndpointSlices, and what each gateway pod sees
   * of the app (its balancer gauges, read through the API server's pod proxy) and logged.
   */
  const whyRefused = async (app: string, results: Array<{ status: number; text: string }>) => {
    const failed = results.filter((r) => r.status !== 200);
    if (failed.length === 0) return '';
    const show = (p: Promise<string>) => p.catch((e) => String(e));
    const slices = await show(kubectl('-n', project, 'get', 'endpointslices', '-o', 'yaml'));
    const pods = (
      await kc.makeApiClient(CoreV1Api).listNamespacedPod({
        namespace: PLATFORM_NAMESPACE,
        labelSelector: 'app.kubernetes.io/component=gateway',
      })
    ).items.map((p) => p.metadata?.name ?? '');
    const views: string[] = [];
    for (const pod of pods) {
      const metrics = await show(
        kubectl('get', '--raw', `/api/v1/namespaces/${PLATFORM_NAMESPACE}/pods/${pod}:9090/proxy/metrics`),
      );
      const mine = metrics
        .split('\n')
        .filter((l) => l.startsWith('apphost_gateway_') && l.includes(`app="${app}"`));
      const logs = await show(kubectl('-n', PLATFORM_NAMESPACE, 'logs', pod, '--tail=150'));
      views.push(`--- ${pod}: balancer\n${mine.join('\n')}\n--- ${pod}: log\n${logs}`);
    }
    return `${failed.map((r) => `${r.status} ${r.text}`).join('\n')}\nEndpointSlices:\n${slices}\n${views.join('\n')}`;
  };
  const scaledToZero = async (name: string) => {
    const a = await getApp(name);
    const ready = a.status?.conditions?.find((c) => c.type === 'Ready');
    const pods = await kc.makeApiClient(CoreV1Api).listNamespacedPod({
      namespace: project,
      labelSelector: `apphost.dev/app=${name}`,
    });
    return ready?.status === 'True' && ready.reason === 'ScaledToZero' && pods.items.length === 0;
  };
  const explainZero = (name: string) => async (err: unknown) => {
    const a = await getApp(name);
    const pods = await kubectl('-n', project, 'get', 'pods', '-o', 'wide');
    const logs = await kubectl(
      '-n',
      PLATFORM_NAMESPACE,
      'logs',
      'deploy/apphost-operator',
      '--tail=60',
    ).catch((e) => String(e));
    throw new Error(`${err}\nApp status: ${JSON.stringify(a.status)}\n${pods}\noperator:\n${logs}`);
  };

  beforeAll(
    async () => {
      kc = clusterKubeConfig();
      await upgrade([
        `operator.extraEnv=${JSON.stringify(WINDOWS)}`,
        `gateway.extraEnv=${JSON.stringify(GATEWAY)}`,
      ]);
      project = await createProject(kc);
      saToken = await serviceAccountToken(project);
      token = await runToken(project, saToken);
      await app('single', TIMED, { minReplicas: 1, maxReplicas: 1, replicaConcurrency: 1 });
      await app('trio', TIMED, {
        minReplicas: 1,
        maxReplicas: 3,
        replicaConcurrency: 1,
        targetUtilization: 100,
        cooldownSeconds: 2,
      });
      await app('zero', TIMED, { minReplicas: 0, maxReplicas: 1, cooldownSeconds: 1 });
      await app('pair', TIMED, { minReplicas: 2, maxReplicas: 2, replicaConcurrency: 10 });
      for (const name of ['single', 'trio', 'pair']) {
        await kubectl(
          '-n',
          project,
          'wait',
          '--for=condition=Ready',
          `app/${name}`,
          `--timeout=${STEP_MS / 1000}s`,
        );
      }
    },
    PLATFORM_READY_TIMEOUT_MS + 4 * STEP_MS,
  );

  afterAll(async () => {
    await Promise.all(forwards.map((f) => f.stop()));
    await kubectl('delete', 'namespace', project, '--wait=false').catch(() => {});
    await upgrade(['operator.extraEnv=[]', 'gateway.extraEnv=[]']);
  }, PLATFORM_READY_TIMEOUT_MS + 60_000);

  it('replicaConcurrency 1, maxReplicas 1: three concurrent 1 s calls never run two at once in the pod', async () => {
    await waitFor('single serves', async () => (await timed('single', 0)).status === 200, STEP_MS, 250);
    const results = await Promise.all([1, 2, 3].map(() => timed('single', 1)));
    expect(
      results.map((r) => r.status),
      await whyRefused('single', results),
    ).toEqual([200, 200, 200]);
    expect(maxOverlap(results.map((r) => r.body as Timed))).toBe(1);
  });

  it('two gateway pods, each sent calls directly: the limit of 1 still holds on the one replica', {
    timeout: 2 * STEP_MS,
  }, async () => {
    const pods = (
      await kc.makeApiClient(CoreV1Api).listNamespacedPod({
        namespace: PLATFORM_NAMESPACE,
        labelSelector: 'app.kubernetes.io/component=gateway',
      })
    ).items.filter(
      (p) =>
        !p.metadata?.deletionTimestamp &&
        p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    expect(pods).toHaveLength(2);
    const ports: number[] = [];
    for (const pod of pods) {
      const name = pod.metadata?.name as string;
      const port = await freePort();
      forwards.push(
        startProcess(
          `port-forward-${name}`,
          binaryPath('kubectl'),
          [
            '--kubeconfig',
            info().kubeconfigPath,
            '-n',
            PLATFORM_NAMESPACE,
            'port-forward',
            `pod/${name}`,
            `${port}:8080`,
          ],
          { logFile: join(info().root, 'logs', `port-forward-${name}.log`) },
        ),
      );
      await waitFor(
        `${name} answers through its port-forward`,
        async () => (await timedVia(port, 'single', 0)).status === 200,
        STEP_MS,
        250,
      );
      ports.push(port);
    }
    // Three calls through each gateway at once: each gateway alone would allow one on the replica.
    const results = await Promise.all(
      ports.flatMap((port) => [1, 2, 3].map(() => timedVia(port, 'single', 1))),
    );
    expect(
      results.map((r) => r.status),
      await whyRefused('single', results),
    ).toEqual(Array(6).fill(200));
    expect(maxOverlap(results.map((r) => r.body as Timed))).toBe(1);
  });

  it('maxReplicas 3: out to 3 pods under load, calls overlap, never two on one pod; back to 1 after the cooldown', {
    timeout: 4 * STEP_MS,
  }, async () => {
    const t0 = performance.now();
    let desiredMs: number | undefined;
    let readyMs: number | undefined;
    const results: Awaited<ReturnType<typeof timed>>[] = [];
    // Six callers keep the app loaded until 3 pods are Ready, then make one more call each.
    const worker = async () => {
      while (readyMs === undefined) results.push(await timed('trio', 1));
      results.push(await timed('trio', 1));
    };
    const workers = Array.from({ length: 6 }, worker);
    await waitFor(
      'trio: 3 pods Ready under load',
      async () => {
        if (desiredMs === undefined && (await getApp('trio')).status?.desiredReplicas === 3) {
          desiredMs = performance.now() - t0;
        }
        if ((await readyPods('trio')) !== 3) return false;
        readyMs = performance.now() - t0;
        return true;
      },
      STEP_MS,
      250,
    );
    await Promise.all(workers);
    const upMs = readyMs as number;
    process.stdout.write(
      `figure: scale up on the cluster (load of 6 × 1 s calls, replicaConcurrency 1): desired 3 after ${Math.round(desiredMs ?? upMs)} ms, 3 pods Ready after ${Math.round(upMs)} ms\n`,
    );
    expect(results.filter((r) => r.status !== 200)).toEqual([]);
    const runs = results.map((r) => r.body as Timed);
    const hosts = new Set(runs.map((r) => r.host));
    expect(hosts.size).toBeGreaterThan(1);
    expect(maxOverlap(runs)).toBeGreaterThan(1);
    for (const h of hosts) expect(maxOverlap(runs.filter((r) => r.host === h))).toBe(1);
    const idle = performance.now();
    await waitFor(
      'trio back to 1 desired and 1 pod',
      async () => (await getApp('trio')).status?.desiredReplicas === 1 && (await readyPods('trio')) === 1,
      STEP_MS,
      500,
    );
    process.stdout.write(
      `figure: scale down on the cluster (cooldownSeconds 2, stable window 5 s): 1 pod after ${Math.round(performance.now() - idle)} ms idle\n`,
    );
  });

  it('minReplicas 0: scaled to zero (Ready, ScaledToZero); the next call through the ingress is held and answered 200', {
    timeout: 3 * STEP_MS,
  }, async () => {
    await waitFor('zero scaled to zero', () => scaledToZero('zero'), STEP_MS, 500).catch(explainZero('zero'));
    const t0 = performance.now();
    const r = await timed('zero', 0);
    const coldMs = performance.now() - t0;
    expect(r.status, r.text).toBe(200);
    process.stdout.write(
      `figure: cold start on the cluster (scaled to zero → first 200 through the ingress): ${Math.round(coldMs)} ms\n`,
    );
  });

  it('an async run for an app at zero stays queued and wakes it; the run succeeds', {
    timeout: 3 * STEP_MS,
  }, async () => {
    await waitFor('zero scaled to zero again', () => scaledToZero('zero'), STEP_MS, 500).catch(
      explainZero('zero'),
    );
    const t0 = performance.now();
    const res = await call(token, `/v4/${project}/zero/timed?async=true`, { seconds: 0 });
    const text = await res.body.text();
    expect(res.statusCode, text).toBe(202);
    const id = (JSON.parse(text) as { run_id: string }).run_id;
    let state = '';
    await waitFor(
      `run ${id} finished`,
      async () => {
        const r = await management(saToken, 'GET', `/v2/projects/${project}/runs/${id}`);
        state = r.status === 200 ? (r.body as { state: string }).state : '';
        return ['success', 'failure', 'timeout', 'cancelled'].includes(state);
      },
      STEP_MS,
      500,
    );
    expect(state).toBe('success');
    process.stdout.write(
      `figure: async run for an app at zero (accepted → success): ${Math.round(performance.now() - t0)} ms\n`,
    );
  });

  it('main.py raises on import: a held call fails with 503 naming the error, not at the cold-start bound', {
    timeout: 2 * STEP_MS,
  }, async () => {
    await app('broken', BROKEN, { minReplicas: 0, maxReplicas: 1 });
    const res = await call(token, `/v4/${project}/broken/run`, {});
    const body = JSON.parse(await res.body.text()) as { error: { code: string; message: string } };
    expect(res.statusCode).toBe(503);
    expect(body.error.code).toBe('app_start_failed');
    expect(body.error.message).toContain('RuntimeError: the model file is missing');
  });

  it('a replica deleted under load: no failed call (preStop pause, retry on the other replica)', {
    timeout: 2 * STEP_MS,
  }, async () => {
    await waitFor('two pods', async () => (await readyPods('pair')) === 2, STEP_MS, 500);
    const statuses: number[] = [];
    let stop = false;
    const worker = async () => {
      while (!stop) statuses.push((await timed('pair', 0.05)).status);
    };
    const workers = Array.from({ length: 4 }, worker);
    await waitFor('calls flowing', async () => statuses.length >= 40, STEP_MS, 100);
    const pods = await kc.makeApiClient(CoreV1Api).listNamespacedPod({
      namespace: project,
      labelSelector: 'apphost.dev/app=pair',
    });
    const victim = pods.items[0]?.metadata?.name as string;
    await kubectl('-n', project, 'delete', 'pod', victim, '--wait=true');
    const after = statuses.length;
    await waitFor('calls after the deletion', async () => statuses.length >= after + 80, STEP_MS, 100);
    stop = true;
    await Promise.all(workers);
    const failed = statuses.filter((s) => s !== 200);
    process.stdout.write(
      `figure: replica deleted under load: ${statuses.length} calls, ${failed.length} failed\n`,
    );
    expect(failed).toEqual([]);
  });

  it('a scale-down under steady load loses no call', { timeout: 3 * STEP_MS }, async () => {
    const statuses: number[] = [];
    let heavy = true;
    let done = false;
    const worker = async (until: () => boolean) => {
      while (!until()) statuses.push((await timed('trio', 0.5)).status);
    };
    const light = worker(() => done);
    const extra = [worker(() => !heavy), worker(() => !heavy), worker(() => !heavy)];
    await waitFor('trio out to 3', async () => (await readyPods('trio')) === 3, STEP_MS, 500);
    heavy = false;
    await Promise.all(extra);
    await waitFor('trio back to 1 pod', async () => (await readyPods('trio')) === 1, STEP_MS, 500);
    await sleep(2_000);
    done = true;
    await light;
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
  });
});
