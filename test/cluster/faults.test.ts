/**
 * Faults and lifecycle on the real cluster, as a platform's users meet them: a gateway pod deleted
 * under async load (no accepted run lost), an app pod deleted during a call (the call completes: SIGTERM
 * drains), and `helm upgrade` with a changed value rolling every piece while calls go on (none fails).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../harness/process.ts';
import {
  clusterKubeConfig,
  createProject,
  helm,
  kubectl,
  PLATFORM_NAMESPACE,
  PLATFORM_RELEASE,
} from './fixture.ts';
import { CHART, PLATFORM_READY_TIMEOUT_MS } from './platform.ts';
import { call, deployConfigMapApp, firstOk, management, runToken, serviceAccountToken } from './user.ts';

/** Bound on every accepted async run reaching a terminal state after the fault. */
const RUNS_SETTLE_MS = 180_000;

async function podsOf(kc: KubeConfig, namespace: string, selector: string): Promise<string[]> {
  const pods = await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace, labelSelector: selector });
  return pods.items.filter((p) => !p.metadata?.deletionTimestamp).map((p) => p.metadata?.name as string);
}

describe('faults and lifecycle on the real cluster', () => {
  let kc: KubeConfig;
  let project: string;
  let saToken: string;
  let token: string;

  beforeAll(async () => {
    kc = clusterKubeConfig();
    project = await createProject(kc);
    saToken = await serviceAccountToken(project);
    token = await runToken(project, saToken);
    await deployConfigMapApp(project, 'slow', 'slow', { responseGracePeriodSeconds: 30 });
    await firstOk(token, `/v4/${project}/slow/run`, { seconds: 0 });
  });

  afterAll(async () => {
    await kubectl('delete', 'namespace', project, '--wait=false').catch(() => {});
  });

  it('loses no accepted async run when a gateway pod is deleted under load', {
    timeout: RUNS_SETTLE_MS + 240_000,
  }, async () => {
    const accepted: string[] = [];
    const refused: number[] = [];
    let stop = false;
    const load = (async () => {
      // Bounded by `stop` (set below) and, as a backstop, a count.
      for (let i = 0; !stop && i < 5000; i++) {
        const res = await call(token, `/v4/${project}/slow/run?async=true`, {
          seconds: 0.1,
          label: `run-${i}`,
        }).catch(() => undefined);
        if (!res) {
          refused.push(0);
          continue;
        }
        const body = await res.body.text();
        if (res.statusCode === 202) accepted.push((JSON.parse(body) as { run_id: string }).run_id);
        else refused.push(res.statusCode);
      }
    })();
    await waitFor('20 runs accepted', async () => accepted.length >= 20, 60_000, 50);
    const [victim] = await podsOf(kc, PLATFORM_NAMESPACE, 'app.kubernetes.io/component=gateway');
    await kubectl('-n', PLATFORM_NAMESPACE, 'delete', 'pod', victim as string, '--wait=true');
    const at = accepted.length;
    await waitFor(
      '20 more runs accepted after the delete',
      async () => accepted.length >= at + 20,
      120_000,
      50,
    );
    stop = true;
    await load;

    const states = new Map<string, string>();
    await waitFor(
      `all ${accepted.length} accepted runs finished`,
      async () => {
        for (const id of accepted) {
          if (states.get(id) === 'success') continue;
          const r = await management(saToken, 'GET', `/v2/projects/${project}/runs/${id}`);
          if (r.status === 200) {
            const run = r.body as { state: string; error?: { code: string; message: string } };
            states.set(id, run.error ? `${run.state} (${run.error.code}: ${run.error.message})` : run.state);
          }
        }
        return accepted.every((id) =>
          ['success', 'failure', 'timeout', 'cancelled'].includes(states.get(id) ?? ''),
        );
      },
      RUNS_SETTLE_MS,
      1000,
    ).catch((err) => {
      const byState: Record<string, number> = {};
      for (const id of accepted)
        byState[states.get(id) ?? 'no record'] = (byState[states.get(id) ?? 'no record'] ?? 0) + 1;
      throw new Error(`${err}; states of the ${accepted.length} accepted runs: ${JSON.stringify(byState)}`);
    });
    const notSuccess = accepted
      .filter((id) => states.get(id) !== 'success')
      .map((id) => `${id}: ${states.get(id)}`);
    expect(notSuccess).toEqual([]);
    process.stderr.write(
      `cluster suite: gateway pod deleted under async load: ${accepted.length} accepted, all succeeded; ${refused.length} calls refused (${[...new Set(refused)].join(',')})\n`,
    );
  });

  it("completes a call in flight when its app pod is deleted (SIGTERM drains within the app's grace)", async () => {
    const [pod] = await podsOf(kc, project, 'apphost.dev/app=slow');
    const inFlight = call(token, `/v4/${project}/slow/run`, { seconds: 4, label: 'drained' });
    // Let the call reach the pod before the pod is told to stop.
    await sleep(1500);
    await kubectl('-n', project, 'delete', 'pod', pod as string, '--wait=false');
    const res = await inFlight;
    const body = await res.body.text();
    expect(res.statusCode, body).toBe(200);
    expect(JSON.parse(body)).toEqual({ label: 'drained', slept_seconds: 4 });
  });

  it('rolls every piece on helm upgrade with a changed value, with no failed call', {
    timeout: PLATFORM_READY_TIMEOUT_MS * 2 + 60_000,
  }, async () => {
    await firstOk(token, `/v4/${project}/slow/run`, { seconds: 0 });
    const failures: string[] = [];
    let calls = 0;
    let stop = false;
    const load = (async () => {
      while (!stop) {
        calls++;
        const res = await call(token, `/v4/${project}/slow/run`, { seconds: 0, label: 'upgrade' }).catch(
          (err: Error) => err,
        );
        if (res instanceof Error) failures.push(res.message);
        else {
          const body = await res.body.text();
          if (res.statusCode !== 200) failures.push(`${res.statusCode} ${body}`);
        }
      }
    })();
    const before = await podsOf(kc, PLATFORM_NAMESPACE, 'app.kubernetes.io/component=gateway');
    await helm([
      'upgrade',
      PLATFORM_RELEASE,
      CHART,
      '--namespace',
      PLATFORM_NAMESPACE,
      '--reuse-values',
      '--set',
      'logLevel=debug',
      '--wait',
      `--timeout=${PLATFORM_READY_TIMEOUT_MS / 1000}s`,
    ]);
    stop = true;
    await load;
    const after = await podsOf(kc, PLATFORM_NAMESPACE, 'app.kubernetes.io/component=gateway');
    expect(after.some((p) => before.includes(p))).toBe(false);
    process.stderr.write(
      `cluster suite: helm upgrade under load: ${calls} calls, ${failures.length} failed\n`,
    );
    expect(failures).toEqual([]);
    // Leave the install as the other files expect it.
    await helm([
      'upgrade',
      PLATFORM_RELEASE,
      CHART,
      '--namespace',
      PLATFORM_NAMESPACE,
      '--reuse-values',
      '--set',
      'logLevel=info',
      '--wait',
      `--timeout=${PLATFORM_READY_TIMEOUT_MS / 1000}s`,
    ]);
  });
});
