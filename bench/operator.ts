/**
 * (5) Operator convergence: N Apps are created in a fresh namespace of the test control plane
 * (etcd + kube-apiserver), then the real operator (`createOperator`) is started and timed until every
 * App has its Deployment and Service and a status for its current generation. API writes are counted by
 * the operator's own `apphost_operator_kube_writes_total` (Lease renewals excluded: that is how a leader
 * stays leader), then counted again over a steady-state window longer than two resync periods, where
 * the figure must be zero.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { Agent, request } from 'undici';
import type { App } from '../src/apis/v1alpha1/types.ts';
import { MANAGED_SELECTOR } from '../src/operator/app/resources/labels.ts';
import { createOperator } from '../src/operator/operator.ts';
import { defaultOperatorSettings } from '../src/operator/settings.ts';
import { createKubeClient, type KubeClient } from '../src/shared/kube/client.ts';
import { kubeConfigFromString } from '../src/shared/kube/config.ts';
import { type KubeObject, Resources } from '../src/shared/kube/objects.ts';
import { createLogger } from '../src/shared/log.ts';
import { binaryPath } from '../test/harness/binaries.ts';
import { type ControlPlane, startControlPlane } from '../test/harness/controlplane.ts';
import { waitFor } from '../test/harness/process.ts';
import type { BenchContext } from './support/context.ts';
import { REPO_ROOT } from './support/parts.ts';
import { sleep } from './support/stats.ts';

const exec = promisify(execFile);

/** Bound on N Apps converging (generous: two cores shared with everything else). */
export const CONVERGE_TIMEOUT_MS = 240_000;
/** Progress lines while waiting. */
export const PROGRESS_EVERY_MS = 10_000;
/** How often convergence is checked (three LISTs): bounds the time figure's resolution. */
export const CONVERGE_POLL_MS = 500;
/** The operator's resync period during the benchmark: short, so the steady-state window sees resyncs. */
export const BENCH_RESYNC_MS = 5_000;
/** Steady-state window: more than two resync periods, in which no write may happen. */
export const STEADY_WINDOW_MS = 2 * BENCH_RESYNC_MS + 3_000;
/** Service CIDR of the benchmark's control plane: room for 65k ClusterIPs. */
export const BENCH_SERVICE_CIDR = '10.96.0.0/16';
/** Concurrent creates while seeding the Apps. */
export const CREATE_CONCURRENCY = 16;

async function kubectl(cp: ControlPlane, ...args: string[]) {
  return exec(binaryPath('kubectl'), ['--kubeconfig', cp.kubeconfigPath, ...args], { cwd: REPO_ROOT });
}

async function applyCrds(cp: ControlPlane): Promise<void> {
  await waitFor(
    'kubectl apply -f crds/',
    async () => {
      await kubectl(
        cp,
        'apply',
        '--server-side',
        '--force-conflicts',
        '--field-manager=apphost-bench',
        '-f',
        'crds/',
      );
      return true;
    },
    60_000,
    500,
  );
  await kubectl(
    cp,
    'wait',
    '--for=condition=Established',
    '--timeout=60s',
    'crd/apps.apphost.dev',
    'crd/domainassignments.apphost.dev',
  );
}

async function seedApps(client: KubeClient, namespace: string, n: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CREATE_CONCURRENCY }, async () => {
      while (next < n) {
        const i = next++;
        const app: App & KubeObject = {
          apiVersion: Resources.App.apiVersion,
          kind: 'App',
          metadata: { name: `app-${i}`, namespace },
          spec: { runtime: 'cortex', image: 'example.invalid/bench-app:1' },
        } as App & KubeObject;
        await client.create(Resources.App, app);
      }
    }),
  );
}

async function convergedCount(client: KubeClient, namespace: string): Promise<number> {
  const [apps, deps, svcs] = await Promise.all([
    client.list<KubeObject>(Resources.App, { namespace }),
    client.list<KubeObject>(Resources.Deployment, { namespace, labelSelector: MANAGED_SELECTOR }),
    client.list<KubeObject>(Resources.Service, { namespace, labelSelector: MANAGED_SELECTOR }),
  ]);
  const depNames = new Set(deps.items.map((d) => d.metadata.name));
  const svcNames = new Set(svcs.items.map((s) => s.metadata.name));
  return apps.items.filter(
    (a) =>
      depNames.has(a.metadata.name) &&
      svcNames.has(a.metadata.name) &&
      (a.status as { observedGeneration?: number } | undefined)?.observedGeneration === a.metadata.generation,
  ).length;
}

async function writesByResource(registry: Registry): Promise<Map<string, number>> {
  const m = await registry.getSingleMetric('apphost_operator_kube_writes_total')?.get();
  const out = new Map<string, number>();
  for (const v of m?.values ?? []) {
    const r = String(v.labels.resource);
    if (r === 'leases') continue;
    out.set(r, (out.get(r) ?? 0) + v.value);
  }
  return out;
}

const WRITE_VERBS = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'APPLY', 'DELETECOLLECTION']);
/** What the operator writes (the apiserver's own bookkeeping, e.g. flowschemas and endpoints, is not it). */
const OPERATOR_RESOURCES = new Set([
  'apps',
  'domainassignments',
  'deployments',
  'services',
  'ingresses',
  'events',
]);

/**
 * Writes the apiserver itself counted (`apiserver_request_total`) on the resources the operator owns,
 * by `VERB resource`: a cross-check of the operator's own counter that does not trust the operator.
 */
async function apiserverWrites(cp: ControlPlane): Promise<Map<string, number>> {
  const agent = new Agent({ connect: { ca: Buffer.from(cp.caData, 'base64').toString('utf8') } });
  try {
    const res = await request(`${cp.server}/metrics`, {
      dispatcher: agent,
      headers: { authorization: `Bearer ${cp.token}` },
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`apiserver /metrics answered ${res.statusCode}`);
    const out = new Map<string, number>();
    for (const line of text.split('\n')) {
      if (!line.startsWith('apiserver_request_total{')) continue;
      const verb = /verb="([^"]*)"/.exec(line)?.[1] ?? '';
      const resource = /resource="([^"]*)"/.exec(line)?.[1] ?? '';
      if (!WRITE_VERBS.has(verb) || !OPERATOR_RESOURCES.has(resource)) continue;
      const k = `${verb} ${resource}`;
      out.set(k, (out.get(k) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
    }
    return out;
  } finally {
    await agent.close();
  }
}

/** Entries of `after` that grew since `before`, as `key +n`. */
function grown(before: Map<string, number>, after: Map<string, number>): string[] {
  return [...after.entries()]
    .filter(([k, v]) => v > (before.get(k) ?? 0))
    .map(([k, v]) => `${k} +${v - (before.get(k) ?? 0)}`);
}

const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

export async function operatorConvergence(ctx: BenchContext): Promise<void> {
  const { report, settings } = ctx;
  let cp: ControlPlane;
  try {
    // One Service per App: the default /24 ClusterIP range is too small for N=1000.
    cp = await startControlPlane({ serviceClusterIpRange: BENCH_SERVICE_CIDR });
  } catch (err) {
    for (const n of settings.operatorApps) {
      report.unavailable(
        'operator',
        `N=${n}`,
        `no test control plane: ${(err as Error).message.split('\n')[0]}`,
      );
    }
    return;
  }
  try {
    await applyCrds(cp);
    // As the operator's main.ts gets it (loadKubeConfig): kept-alive connections, where a bare
    // KubeConfig gets a new TLS connection per request from client-node 2.0.x (shared/kube/connection.ts).
    const kc = kubeConfigFromString(cp.kubeconfigYaml);
    const client = createKubeClient(kc, {
      fieldManager: 'apphost-bench',
      requestTimeoutMs: 60_000,
      watchIdleTimeoutMs: 300_000,
    });
    for (const n of settings.operatorApps) {
      const namespace = `bench-op-${n}-${randomBytes(3).toString('hex')}`;
      await client.create(Resources.Namespace, {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: namespace },
      });
      const seedStart = Date.now();
      await seedApps(client, namespace, n);
      const seedSeconds = (Date.now() - seedStart) / 1000;

      const registry = new Registry();
      const base = defaultOperatorSettings();
      const operator = createOperator({
        kc,
        log: createLogger({
          name: 'bench-operator',
          level: 'info',
          destination: createWriteStream(join(ctx.parts.logDir, `operator-${n}.log`)),
        }),
        registry,
        settings: defaultOperatorSettings({
          watchNamespace: namespace,
          gatewayNamespace: namespace,
          runtimeImage: 'example.invalid/runtime-python:bench',
          resyncPeriodMs: BENCH_RESYNC_MS,
          leaderElection: {
            ...base.leaderElection,
            namespace,
            identity: `bench-${process.pid}`,
            leaseDurationMs: 15_000,
            renewDeadlineMs: 10_000,
            retryPeriodMs: 500,
          },
        }),
      });
      const t0 = Date.now();
      try {
        await operator.start();
        let last = 0;
        let lastPrint = Date.now();
        try {
          await waitFor(
            `${n} Apps to converge`,
            async () => {
              last = await convergedCount(client, namespace);
              if (Date.now() - lastPrint > PROGRESS_EVERY_MS) {
                lastPrint = Date.now();
                process.stdout.write(
                  `    ${last}/${n} converged after ${((lastPrint - t0) / 1000).toFixed(0)} s\n`,
                );
              }
              return last === n;
            },
            CONVERGE_TIMEOUT_MS,
            CONVERGE_POLL_MS,
          );
        } catch {
          const writes = total(await writesByResource(registry));
          report.row({
            benchmark: 'operator',
            variant: `N=${n} Apps converge (cold start)`,
            other: `did NOT converge: ${last}/${n} after ${CONVERGE_TIMEOUT_MS / 1000} s; ${writes} writes so far`,
          });
          continue;
        }
        const seconds = (Date.now() - t0) / 1000;
        const converged = await writesByResource(registry);
        const serverBefore = await apiserverWrites(cp);
        await sleep(STEADY_WINDOW_MS);
        const steady = total(await writesByResource(registry)) - total(converged);
        const serverGrown = grown(serverBefore, await apiserverWrites(cp));
        const serverSteady = serverGrown.length ? `${serverGrown.join(', ')}` : '0';
        const breakdown = [...converged.entries()].map(([r, c]) => `${r} ${c}`).join(', ');
        report.row({
          benchmark: 'operator',
          variant: `N=${n} Apps converge (cold start)`,
          throughput: `${(n / seconds).toFixed(1)} Apps/s`,
          other:
            `converged in ${seconds.toFixed(1)} s; ${(total(converged) / n).toFixed(2)} writes/App (${breakdown}); ` +
            `steady-state writes over ${STEADY_WINDOW_MS / 1000} s: ${steady} by the operator's count, ${serverSteady} by the apiserver's${steady === 0 && serverSteady === '0' ? '' : ' (MUST be 0!)'}; ` +
            `seeding took ${seedSeconds.toFixed(1)} s`,
        });
      } finally {
        await operator.stop();
      }
    }
  } finally {
    await cp.stop();
  }
}
