/**
 * What the operator puts on a real node (issue 20): an App's status names why its pods fail, from what
 * the kubelet reports (a SyntaxError in main.py, an image that cannot be pulled); App pods run under
 * Pod Security `restricted`; and how long an App takes from created to Ready with the startup probe
 * against the probes the operator used before (printed as figures, not asserted: the CPU is shared).
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App, Condition } from '../../src/apis/v1alpha1/types.ts';
import { waitFor } from '../harness/process.ts';
import { clusterKubeConfig, createProject, kubectl, kubectlApply } from './fixture.ts';
import { imageRef } from './node.ts';

/** Bound on the kubelet reaching a state (pull attempt, first crash) and the operator reporting it. */
const CAUSE_TIMEOUT_MS = 120_000;
/** Bound on an App becoming Ready (image present: pod start + runtime import). */
const APP_READY_TIMEOUT_MS = 120_000;

let kc: KubeConfig;
const projects: string[] = [];

async function project(labels: Record<string, string> = {}): Promise<string> {
  const ns = await createProject(kc);
  projects.push(ns);
  if (Object.keys(labels).length) {
    await kubectl('label', 'namespace', ns, ...Object.entries(labels).map(([k, v]) => `${k}=${v}`));
  }
  return ns;
}

async function getApp(ns: string, name: string): Promise<App> {
  return JSON.parse(await kubectl('-n', ns, 'get', 'app', name, '-o', 'json')) as App;
}
const readyOf = (a: App): Condition | undefined => a.status?.conditions?.find((c) => c.type === 'Ready');

async function waitForReady(
  ns: string,
  name: string,
  want: (c: Condition | undefined) => boolean,
  ms: number,
) {
  let last: Condition | undefined;
  await waitFor(
    `App ${ns}/${name} Ready condition`,
    async () => {
      last = readyOf(await getApp(ns, name));
      return want(last);
    },
    ms,
    250,
  ).catch((err) => {
    throw new Error(`${err}; last Ready condition: ${JSON.stringify(last)}`);
  });
  return getApp(ns, name);
}

/** A cortex App whose main.py is `source` (a ConfigMap, as the README shows). */
async function cortexApp(ns: string, name: string, source: string, extraSpec = '') {
  await kubectlApply(
    ns,
    `apiVersion: v1
kind: ConfigMap
metadata: {name: ${name}-code}
data:
  main.py: ${JSON.stringify(source)}
---
apiVersion: apphost.dev/v1alpha1
kind: App
metadata: {name: ${name}}
spec: {runtime: cortex, code: {configMapRef: {name: ${name}-code}}${extraSpec}}
`,
  );
}

const HELLO = 'def run(name="world"):\n    return {"message": f"hello {name}"}\n';

beforeAll(() => {
  kc = clusterKubeConfig();
});

afterAll(async () => {
  const core = kc.makeApiClient(CoreV1Api);
  for (const name of projects) await core.deleteNamespace({ name }).catch(() => {});
});

describe('App status names why pods fail, from the kubelet', () => {
  it('a SyntaxError in main.py: CrashLoopBackOff with the error, file and line; no URL', async () => {
    const ns = await project();
    await cortexApp(ns, 'broken', 'def ok():\n    return 1\n\ndef broken(:\n    pass\n');
    const app = await waitForReady(ns, 'broken', (c) => c?.reason === 'CrashLoopBackOff', CAUSE_TIMEOUT_MS);
    const ready = readyOf(app);
    expect(ready?.status).toBe('False');
    expect(ready?.message).toMatch(/^container "app" exited with code 1: cannot import \/app\/main\.py:/);
    expect(ready?.message).toMatch(/File "\/app\/main\.py", line 4/);
    expect(ready?.message).toMatch(/SyntaxError: invalid syntax/);
    expect(app.status?.url).toBeUndefined();
    // kubectl describe shows it as a Warning Event on the App.
    await waitFor(
      'Warning Event on the App',
      async () =>
        (await kubectl('-n', ns, 'get', 'events', '--field-selector', 'involvedObject.name=broken')).includes(
          'CrashLoopBackOff',
        ),
      30_000,
      500,
    );
  });

  it('an image that cannot be pulled: ImagePullFailed naming the image', async () => {
    const ns = await project();
    const image = 'registry.invalid/apphost-test/no-such-app:1';
    await kubectlApply(
      ns,
      `apiVersion: apphost.dev/v1alpha1
kind: App
metadata: {name: nopull}
spec: {runtime: cortex, image: "${image}"}
`,
    );
    const app = await waitForReady(ns, 'nopull', (c) => c?.reason === 'ImagePullFailed', CAUSE_TIMEOUT_MS);
    expect(readyOf(app)?.status).toBe('False');
    expect(readyOf(app)?.message).toMatch(
      /^image "registry\.invalid\/apphost-test\/no-such-app:1" cannot be pulled: .+/,
    );
    expect(app.status?.url).toBeUndefined();
    process.stderr.write(`cluster suite: ImagePullFailed message: ${readyOf(app)?.message}\n`);
  });
});

describe('Pod Security restricted', () => {
  it('a project namespace enforcing restricted runs a cortex and a custom App', async () => {
    const ns = await project({
      'pod-security.kubernetes.io/enforce': 'restricted',
      'pod-security.kubernetes.io/enforce-version': 'latest',
    });
    await cortexApp(ns, 'hello', HELLO);
    // A custom App: any image serving HTTP, run as the operator runs it (uid 10001, read-only root).
    await kubectlApply(
      ns,
      `apiVersion: apphost.dev/v1alpha1
kind: App
metadata: {name: files}
spec:
  runtime: custom
  image: "${imageRef('runtime-python')}"
  port: 9000
  entrypoint: [python, -m, http.server, "9000", --directory, /tmp]
`,
    );
    for (const name of ['hello', 'files']) {
      const app = await waitForReady(ns, name, (c) => c?.status === 'True', APP_READY_TIMEOUT_MS);
      expect(app.status?.url).toBe(`http://${name}.${ns}.svc.cluster.local`);
    }
    // Inside: uid 10001, no API token, a read-only root, a writable /tmp.
    const sh = (script: string) =>
      kubectl('-n', ns, 'exec', 'deploy/hello', '-c', 'app', '--', 'python', '-c', script);
    expect((await sh('import os; print(os.getuid(), os.getgid())')).trim()).toBe('10001 10001');
    expect(
      (
        await sh("import os; print(os.path.exists('/var/run/secrets/kubernetes.io/serviceaccount/token'))")
      ).trim(),
    ).toBe('False');
    expect(
      (
        await sh(
          "import errno\ntry:\n    open('/app-root-write', 'w')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])",
        )
      ).trim(),
    ).toBe('EROFS');
    expect((await sh("open('/tmp/x', 'w').write('ok'); print(open('/tmp/x').read())")).trim()).toBe('ok');
  });
});

describe('created → Ready', () => {
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

  /**
   * Creates with `create`, polls (every 100 ms) until a pod labelled `selector` is Ready, and reads
   * when the runtime started listening from its log: `total` is created → Ready, `afterListen` the part
   * the probes decide (the runner and the node share the host's clock).
   */
  async function measure(ns: string, selector: string, create: () => Promise<unknown>) {
    const core = kc.makeApiClient(CoreV1Api);
    const t0 = Date.now();
    await create();
    let pod = '';
    await waitFor(
      `a Ready pod ${selector}`,
      async () => {
        const pods = await core.listNamespacedPod({ namespace: ns, labelSelector: selector });
        const ready = pods.items.find((p) =>
          p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
        );
        pod = ready?.metadata?.name ?? '';
        return Boolean(ready);
      },
      APP_READY_TIMEOUT_MS,
      100,
    );
    const tReady = Date.now();
    const log = await kubectl('-n', ns, 'logs', pod, '-c', 'app');
    const line = log.split('\n').find((l) => l.includes('listening on'));
    const tListen = Date.parse((JSON.parse(line ?? '{}') as { time?: string }).time ?? '');
    return { total: tReady - t0, afterListen: tReady - tListen };
  }

  it('with the startup probe, against the probes used before (figures)', async () => {
    const ns = await project();
    const rounds = 3;
    const now: Array<{ total: number; afterListen: number }> = [];
    const before: Array<{ total: number; afterListen: number }> = [];
    for (let i = 0; i < rounds; i++) {
      // Now: an App as the operator makes it.
      now.push(await measure(ns, `apphost.dev/app=now-${i}`, () => cortexApp(ns, `now-${i}`, HELLO)));
      // Before: the same pod template with the former probes (readiness every 5 s, no startup probe).
      const dep = JSON.parse(await kubectl('-n', ns, 'get', 'deployment', `now-${i}`, '-o', 'json'));
      const c = dep.spec.template.spec.containers[0];
      delete c.startupProbe;
      c.readinessProbe = { httpGet: { path: '/ready', port: 'http' }, periodSeconds: 5, failureThreshold: 3 };
      c.livenessProbe = {
        httpGet: { path: '/health', port: 'http' },
        initialDelaySeconds: 10,
        periodSeconds: 10,
        failureThreshold: 6,
      };
      const labels = { 'apphost-test/before': `b${i}` };
      const old = {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: `before-${i}`, namespace: ns },
        spec: {
          replicas: 1,
          selector: { matchLabels: labels },
          template: { metadata: { labels }, spec: dep.spec.template.spec },
        },
      };
      before.push(
        await measure(ns, `apphost-test/before=b${i}`, () => kubectlApply(ns, JSON.stringify(old))),
      );
    }
    const fmt = (xs: Array<{ total: number; afterListen: number }>) =>
      `created → Ready ${median(xs.map((x) => x.total))} ms, listening → Ready ${median(xs.map((x) => x.afterListen))} ms (${xs.map((x) => `${x.total}/${x.afterListen}`).join(', ')})`;
    process.stderr.write(
      `cluster suite: pod Ready, median of ${rounds}: startup probe: ${fmt(now)}; former probes: ${fmt(before)}\n`,
    );
    // Every figure is real: the pod became Ready and the runtime logged when it listened.
    for (const x of [...now, ...before]) expect(Number.isFinite(x.afterListen)).toBe(true);
  });
});
