/**
 * The native data plane in the gateway pods (docs/design/native-data-plane.md §7, step 8). In both passes:
 * the image's /app/bin/apphost-dataplane runs in the gateway pod (`--version`: the build the image made).
 * In the native pass (the chart's default; the first pass): in each gateway pod
 * the data plane, a child of the gateway's Node process, holds the gateway port's listening socket and is
 * up with no restart; and the pod is Ready only while the data plane answers Node (a stopped data plane
 * takes the pod out of the Service, a resumed one brings it back). In the node pass
 * (APPHOST_TEST_CLUSTER_DATA_PLANE=node, values-node.yaml): no data plane runs.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../harness/process.ts';
import { clusterKubeConfig, kubectl, PLATFORM_NAMESPACE } from './fixture.ts';
import { DATA_PLANE } from './platform.ts';

const BIN = '/app/bin/apphost-dataplane';
/**
 * Bound on a gateway pod's Ready condition following its data plane: the supervisor's pong bound
 * (DATAPLANE_PONG_TIMEOUT_MS, 2 s) and ping interval, then the chart's readiness probe (every 5 s,
 * 2 failures to go unready, 1 success to come back), then the kubelet's status update.
 */
const READY_FOLLOWS_MS = 45_000;

/**
 * Run in the gateway container by its own Node: the processes there, the pid whose socket listens on
 * the gateway port (from /proc/net/tcp{,6} and each process's fds), and the data plane's series from
 * Node's /metrics. Prints one JSON line.
 */
const INSPECT = `
const fs = require('node:fs');
const port = Number(process.argv[1]);
const inodes = new Set();
for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
  for (const line of fs.readFileSync(f, 'utf8').split('\\n').slice(1)) {
    const c = line.trim().split(/\\s+/);
    if (c.length > 9 && c[3] === '0A' && parseInt(c[1].split(':').pop(), 16) === port) inodes.add(c[9]);
  }
}
const procs = [];
for (const pid of fs.readdirSync('/proc').filter((d) => /^\\d+$/.test(d))) {
  try {
    const cmd = fs.readFileSync('/proc/' + pid + '/cmdline', 'utf8').split('\\0').filter(Boolean);
    const status = fs.readFileSync('/proc/' + pid + '/status', 'utf8');
    const ppid = Number(/PPid:\\s+(\\d+)/.exec(status)[1]);
    const rssKiB = Number((/VmRSS:\\s+(\\d+)/.exec(status) || [0, 0])[1]);
    let listens = false;
    for (const fd of fs.readdirSync('/proc/' + pid + '/fd')) {
      const m = /^socket:\\[(\\d+)\\]$/.exec(fs.readlinkSync('/proc/' + pid + '/fd/' + fd) || '');
      if (m && inodes.has(m[1])) listens = true;
    }
    procs.push({ pid: Number(pid), ppid, cmd, listens, rssKiB });
  } catch {}
}
fetch('http://127.0.0.1:' + process.argv[2] + '/metrics').then((r) => r.text()).then((text) => {
  const series = Object.fromEntries(text.split('\\n').filter((l) => l.startsWith('apphost_gateway_dataplane_')).map((l) => l.split(' ')));
  console.log(JSON.stringify({ procs, series }));
});
`;

interface Inspected {
  procs: Array<{ pid: number; ppid: number; cmd: string[]; listens: boolean; rssKiB: number }>;
  series: Record<string, string>;
}

/** Runs `cmd` in the gateway container of `pod`. */
const inGateway = (pod: string, ...cmd: string[]) =>
  kubectl('-n', PLATFORM_NAMESPACE, 'exec', pod, '-c', 'gateway', '--', ...cmd);

async function inspect(pod: string): Promise<Inspected> {
  const out = await inGateway(pod, 'node', '-e', INSPECT, '8080', '9090');
  return JSON.parse(out.trim().split('\n').pop() as string) as Inspected;
}

const mib = (kib: number | undefined) => ((kib ?? 0) / 1024).toFixed(1);

async function gatewayPods(kc: KubeConfig) {
  const pods = await kc.makeApiClient(CoreV1Api).listNamespacedPod({
    namespace: PLATFORM_NAMESPACE,
    labelSelector: 'app.kubernetes.io/component=gateway',
  });
  return pods.items.filter((p) => !p.metadata?.deletionTimestamp);
}

async function podReady(kc: KubeConfig, name: string): Promise<boolean> {
  const pod = await kc.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: PLATFORM_NAMESPACE, name });
  return pod.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
}

describe(`the data plane in the gateway pods (gateway.dataPlane: ${DATA_PLANE})`, () => {
  let kc: KubeConfig;
  let pods: string[];

  beforeAll(async () => {
    kc = clusterKubeConfig();
    pods = (await gatewayPods(kc)).map((p) => p.metadata?.name as string);
    expect(pods.length).toBe(2);
  });

  it("runs the image's apphost-dataplane in the gateway pod (--version)", async () => {
    const out = await inGateway(pods[0] as string, BIN, '--version');
    // The build id `make images` gives it: the hash of native/dataplane's sources (a developer build says dev).
    expect(out.trim()).toMatch(/^apphost-dataplane \d+\.\d+\.\d+ \(protocol 1, build src-[0-9a-f]{16}\)$/);
  });

  it.runIf(DATA_PLANE === 'node')('runs no data plane in node mode', async () => {
    for (const pod of pods) {
      const { procs, series } = await inspect(pod);
      expect(procs.filter((p) => p.cmd[0] === BIN)).toEqual([]);
      const gateway = procs.find((p) => p.listens);
      expect(gateway?.cmd[0], pod).toBe('node');
      expect(series).toEqual({});
      process.stderr.write(
        `figure: ${pod} RSS (node mode, when this file runs): gateway ${mib(gateway?.rssKiB)} MiB\n`,
      );
    }
  });

  it.runIf(DATA_PLANE === 'native')(
    'gives each gateway pod a data plane, child of its Node, listening on the gateway port, up with no restart',
    async () => {
      for (const pod of pods) {
        const { procs, series } = await inspect(pod);
        const planes = procs.filter((p) => p.cmd[0] === BIN);
        expect(planes.length, pod).toBe(1);
        const parent = procs.find((p) => p.pid === planes[0]?.ppid);
        expect(parent?.cmd[0], pod).toBe('node');
        // Only the data plane holds the port's listener: Node serves the hand-off socket instead.
        expect(
          procs.filter((p) => p.listens).map((p) => p.cmd[0]),
          pod,
        ).toEqual([BIN]);
        expect(series.apphost_gateway_dataplane_up, pod).toBe('1');
        expect(series.apphost_gateway_dataplane_restarts_total, pod).toBe('0');
        process.stderr.write(
          `figure: ${pod} RSS (native mode, when this file runs): Node ${mib(parent?.rssKiB)} MiB, data plane ${mib(planes[0]?.rssKiB)} MiB\n`,
        );
      }
    },
  );

  it.runIf(DATA_PLANE === 'native')(
    'keeps a gateway pod Ready only while its data plane answers Node (stopped: unready; resumed: Ready)',
    { timeout: READY_FOLLOWS_MS * 2 + 60_000 },
    async () => {
      const pod = pods[0] as string;
      const plane = (await inspect(pod)).procs.find((p) => p.cmd[0] === BIN);
      expect(plane).toBeDefined();
      const signal = (sig: string) =>
        // The image has no kill binary: dash's builtin.
        inGateway(pod, 'sh', '-c', `kill -${sig} ${plane?.pid}`);
      expect(await podReady(kc, pod)).toBe(true);
      await signal('STOP');
      try {
        await waitFor(
          `${pod} unready with its data plane stopped`,
          async () => !(await podReady(kc, pod)),
          READY_FOLLOWS_MS,
          500,
        );
      } finally {
        await signal('CONT');
      }
      await waitFor(
        `${pod} Ready again with its data plane resumed`,
        () => podReady(kc, pod),
        READY_FOLLOWS_MS,
        500,
      );
      // The supervisor waited: the same data plane, no restart.
      const after = await inspect(pod);
      expect(after.procs.find((p) => p.cmd[0] === BIN)?.pid).toBe(plane?.pid);
      expect(after.series.apphost_gateway_dataplane_restarts_total).toBe('0');
    },
  );
});
