/**
 * (5) Operator convergence: N Apps are created in a fresh namespace of the test control plane
 * (etcd + kube-apiserver), then the real operator (`createOperator`) is started and timed until every
 * App has its Deployment and Service and a status for its current generation. API writes are counted by
 * the operator's own `apphost_operator_kube_writes_total` (Lease renewals excluded: that is how a leader
 * stays leader), then counted again over a steady-state window longer than two resync periods, where
 * the figure must be zero.
 *
 * Convergence is followed by watches (three informers of this process, started before the operator),
 * not by listing every 0.5 s: a poll of 3,000 objects cost the API server under test about a tenth of
 * its CPU and this process more (docs/benchmarks.md, "Operator convergence, third round"). The CPU each
 * piece used while converging (this process — the operator and the watches —, kube-apiserver, etcd) is
 * printed with the row, from /proc.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, readFileSync } from 'node:fs';
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
import { createInformer, type Informer } from '../src/shared/kube/informer.ts';
import { type KubeObject, type ObjectWithMeta, Resources } from '../src/shared/kube/objects.ts';
import { createLogger, type Logger } from '../src/shared/log.ts';
import { binaryPath } from '../test/harness/binaries.ts';
import { type ControlPlane, startControlPlane } from '../test/harness/controlplane.ts';
import { waitFor } from '../test/harness/process.ts';
import type { BenchContext } from './support/context.ts';
import { procCpuSeconds, processTree, REPO_ROOT } from './support/parts.ts';
import { sleep } from './support/stats.ts';

const exec = promisify(execFile);

/** Bound on N Apps converging (generous: two cores shared with everything else). */
export const CONVERGE_TIMEOUT_MS = 240_000;
/** Progress lines while waiting. */
export const PROGRESS_EVERY_MS = 10_000;
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

/** What the convergence watches keep of an object: its name, and for an App its generations. */
interface Slim extends ObjectWithMeta {
  observed?: number;
}
const slim = (o: ObjectWithMeta & { status?: { observedGeneration?: number } }): Slim => ({
  metadata: { name: o.metadata.name, namespace: o.metadata.namespace, generation: o.metadata.generation },
  observed: o.status?.observedGeneration,
});

/** Watch settings of the convergence watches: no resync (nothing acts on them), one watch per run. */
const TRACKER_INFORMER_SETTINGS = {
  resyncPeriodMs: 3_600_000,
  watchTimeoutSeconds: 600,
  backoff: { baseDelayMs: 200, maxDelayMs: 5_000 },
};

interface ConvergenceTracker {
  /** Apps with their Deployment, their Service and a status for their generation. */
  converged(): number;
  /** Resolves once `n` Apps have converged; rejects after `timeoutMs`. */
  until(n: number, timeoutMs: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Follows the namespace's Apps, managed Deployments and managed Services by watch, and counts the Apps
 * that have converged (the same rule as a LIST of the three would apply, at each change).
 */
async function trackConvergence(
  client: KubeClient,
  namespace: string,
  log: Logger,
): Promise<ConvergenceTracker> {
  const ok = new Set<string>();
  let wake: (() => void) | undefined;
  let apps!: Informer<Slim>;
  let deps!: Informer<Slim>;
  let svcs!: Informer<Slim>;
  const check = (name: string) => {
    const app = apps?.get(namespace, name);
    const done =
      app !== undefined &&
      app.observed === app.metadata.generation &&
      deps?.get(namespace, name) !== undefined &&
      svcs?.get(namespace, name) !== undefined;
    if (done) ok.add(name);
    else ok.delete(name);
    wake?.();
  };
  const handlers = {
    onAdd: (o: Slim) => check(o.metadata.name),
    onUpdate: (o: Slim) => check(o.metadata.name),
    onDelete: (o: Slim) => check(o.metadata.name),
  };
  const informer = (type: (typeof Resources)[keyof typeof Resources], labelSelector?: string) =>
    createInformer<Slim>({
      client,
      type,
      namespace,
      settings: TRACKER_INFORMER_SETTINGS,
      handlers,
      log,
      transform: slim,
      ...(labelSelector ? { labelSelector } : {}),
    });
  apps = informer(Resources.App);
  deps = informer(Resources.Deployment, MANAGED_SELECTOR);
  svcs = informer(Resources.Service, MANAGED_SELECTOR);
  const all = [apps, deps, svcs];
  for (const i of all) i.start();
  await Promise.all(all.map((i) => i.waitForSync()));
  for (const a of apps.list()) check(a.metadata.name);
  return {
    converged: () => ok.size,
    until: (n, timeoutMs) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          wake = undefined;
          reject(new Error(`${ok.size}/${n} converged after ${timeoutMs} ms`));
        }, timeoutMs);
        wake = () => {
          if (ok.size < n) return;
          wake = undefined;
          clearTimeout(timer);
          resolve();
        };
        wake();
      }),
    stop: async () => {
      await Promise.all(all.map((i) => i.stop()));
    },
  };
}

/** This process's descendants (the control plane runs under a watchdog shell: grandchildren). */
function descendants(pid: number): number[] {
  const kids = processTree(pid).slice(1);
  return [...kids, ...kids.flatMap(descendants)];
}

/** CPU seconds used so far by this process and by the control plane's kube-apiserver and etcd. */
function cpuSplit(): { self: number; apiserver: number; etcd: number } {
  const out = { self: procCpuSeconds(process.pid), apiserver: 0, etcd: 0 };
  for (const pid of descendants(process.pid)) {
    let comm = '';
    try {
      comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    if (comm === 'kube-apiserver') out.apiserver += procCpuSeconds(pid);
    else if (comm === 'etcd') out.etcd += procCpuSeconds(pid);
  }
  return out;
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
      const trackerLog = createLogger({
        name: 'bench-convergence-watch',
        level: 'info',
        destination: createWriteStream(join(ctx.parts.logDir, `convergence-watch-${n}.log`)),
      });
      const tracker = await trackConvergence(client, namespace, trackerLog);
      const cpu0 = cpuSplit();
      const t0 = Date.now();
      try {
        await operator.start();
        const progress = setInterval(() => {
          process.stdout.write(
            `    ${tracker.converged()}/${n} converged after ${((Date.now() - t0) / 1000).toFixed(0)} s\n`,
          );
        }, PROGRESS_EVERY_MS);
        try {
          await tracker.until(n, CONVERGE_TIMEOUT_MS);
        } catch {
          const writes = total(await writesByResource(registry));
          report.row({
            benchmark: 'operator',
            variant: `N=${n} Apps converge (cold start)`,
            other: `did NOT converge: ${tracker.converged()}/${n} after ${CONVERGE_TIMEOUT_MS / 1000} s; ${writes} writes so far`,
          });
          continue;
        } finally {
          clearInterval(progress);
        }
        const seconds = (Date.now() - t0) / 1000;
        const cpu1 = cpuSplit();
        const cpu = `CPU while converging: this process (operator + watches) ${(cpu1.self - cpu0.self).toFixed(1)} s, kube-apiserver ${(cpu1.apiserver - cpu0.apiserver).toFixed(1)} s, etcd ${(cpu1.etcd - cpu0.etcd).toFixed(1)} s`;
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
            `${cpu}; seeding took ${seedSeconds.toFixed(1)} s`,
        });
      } finally {
        await operator.stop();
        await tracker.stop();
      }
    }
  } finally {
    await cp.stop();
  }
}
