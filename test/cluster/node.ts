/**
 * A real single-node Kubernetes cluster for the cluster suite: etcd, kube-apiserver,
 * kube-controller-manager, kube-scheduler, containerd + runc, CNI bridge, kubelet, kube-proxy and
 * CoreDNS, all inside one network + mount + PID namespace held by keeper.sh, which also tears it
 * down completely when the runner stops it or dies. The runner reaches the API server and the ingress
 * through Unix-socket relays (relay.ts) on 127.0.0.1 ports; pods reach the runner's servers the same way
 * in reverse (exposeToPods).
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import type { Server } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { binaryPath } from '../harness/binaries.ts';
import { waitFor } from '../harness/process.ts';
import { caddyConfig, type IngressFixture, startIngressSync } from './ingress/caddy-ingress-fixture.ts';
import {
  cniConfig,
  containerdConfig,
  kubeletConfig,
  kubeProxyConfig,
  type NodeLayout,
} from './node-config.ts';
import { type NodeProcess, startOnNode as onNode, runOnNode as runOn } from './on-node.ts';
import { kubeconfig, makePki } from './pki.ts';
import { relayServer } from './relay.ts';

const exec = promisify(execFile);
const HERE = import.meta.dirname;

/** Bound on each start-up step (API server ready, node Ready, CoreDNS Ready); two shared cores. */
export const CLUSTER_START_TIMEOUT_MS = Number(process.env.APPHOST_TEST_CLUSTER_START_TIMEOUT_MS ?? 180_000);
/** Bound on teardown (keeper.sh kills the namespace, removes cgroups and the state folder). */
export const CLUSTER_STOP_TIMEOUT_MS = 90_000;

export const NODE_NAME = 'apphost-node';
/** The node's address: on the namespace's loopback, where the API server and the ingress listen. */
export const NODE_IP = '10.255.0.1';
const SERVICE_CIDR = '10.96.0.0/16';
const API_SERVICE_IP = '10.96.0.1';
export const DNS_IP = '10.96.0.10';
const POD_CIDR = '10.88.0.0/16';

export interface ClusterInfo {
  /** State folder of this run (/tmp/ahc-<id>): logs, sockets, kubeconfigs. */
  root: string;
  id: string;
  /** Host PID of the namespace's init: `nsenter -t <pid> -n -m -p` runs a command on the node. */
  holderPid: number;
  keeperPid: number;
  /** Admin kubeconfig for the runner (server = the relay on 127.0.0.1). */
  kubeconfigPath: string;
  containerdSocket: string;
  cgroupRoot: string;
  nodeIp: string;
}

export interface Cluster extends ClusterInfo {
  /** Runs `cmd` in the node's namespaces (logs to <root>/logs/<name>.log); resolves once spawned. */
  startOnNode(name: string, cmd: string, args: string[]): NodeProcess;
  /** The ingress's :80 and :443 on the node, relayed to these 127.0.0.1 ports. */
  ingressHttpPort: number;
  ingressHttpsPort: number;
  ingress: IngressFixture;
  /** Listens on 127.0.0.1:<port> (returned) and relays to `target` (host:port inside the node). */
  forward(name: string, target: string): Promise<number>;
  stop(): Promise<void>;
}

/** Fails with the fixing command when the cluster suite cannot run here. */
export function checkPrerequisites(): void {
  if (process.getuid?.() !== 0) {
    throw new Error(
      'the cluster suite needs root (network, mount and PID namespaces, iptables, cgroups): run it as root (sudo make test-cluster), or run everything else with `make test-no-cluster`',
    );
  }
  const missing = [
    ['/usr/sbin/runc', 'runc'],
    ['/usr/lib/cni/bridge', 'containernetworking-plugins'],
    ['/usr/sbin/iptables', 'iptables'],
    ['/usr/sbin/conntrack', 'conntrack'],
  ].filter(([path]) => !existsSync(path as string));
  if (missing.length) {
    throw new Error(
      `missing ${missing.map(([p]) => p).join(', ')}; fix: make deps-cluster (apt-get install ${missing.map(([, pkg]) => pkg).join(' ')})`,
    );
  }
  for (const b of [
    'kubelet',
    'kube-proxy',
    'kube-scheduler',
    'containerd',
    'containerd-shim-runc-v2',
    'ctr',
    'caddy',
  ]) {
    try {
      binaryPath(b);
    } catch {
      throw new Error(`test binary '${b}' is missing; fix: make deps-cluster (hack/build-tools.sh cluster)`);
    }
  }
}

export async function startCluster(opts: { runnerPid?: number } = {}): Promise<Cluster> {
  checkPrerequisites();
  const id = randomBytes(3).toString('hex');
  const root = `/tmp/ahc-${id}`;
  const cgroupRoot = `apphost-${id}`;
  const logs = join(root, 'logs');
  await mkdir(logs, { recursive: true });
  await mkdir(join(root, 'sock'), { recursive: true });

  // The keeper: its own session, so a signal to the runner's process group does not reach it.
  const keeperLog = openSync(join(logs, 'keeper.log'), 'a');
  const keeper = spawn(
    'bash',
    [join(HERE, 'keeper.sh'), String(opts.runnerPid ?? process.pid), root, cgroupRoot],
    {
      detached: true,
      stdio: ['ignore', keeperLog, keeperLog],
    },
  );
  closeSync(keeperLog);
  keeper.unref();
  const keeperPid = keeper.pid as number;
  const relays: Server[] = [];

  const stop = async () => {
    for (const r of relays) r.close();
    await writeFile(join(root, 'stop'), '').catch(() => {});
    await waitFor(
      'cluster teardown (keeper.sh)',
      async () => !processAlive(keeperPid),
      CLUSTER_STOP_TIMEOUT_MS,
      200,
    );
  };

  try {
    await waitFor(
      'the node namespace (keeper.sh)',
      async () => existsSync(join(root, 'holder.pid')),
      30_000,
      50,
    );
    const holderPid = Number(readFileSync(join(root, 'holder.pid'), 'utf8').trim());
    const containerdSocket = join(root, 'sock', 'containerd.sock');

    const startOnNode = (name: string, cmd: string, args: string[]) =>
      onNode(holderPid, root, name, cmd, args);
    const runOnNode = (name: string, cmd: string, args: string[]) => runOn(holderPid, root, name, cmd, args);

    const layout: NodeLayout = {
      root,
      nodeName: NODE_NAME,
      nodeIp: NODE_IP,
      podCidr: POD_CIDR,
      serviceCidr: SERVICE_CIDR,
      dnsIp: DNS_IP,
      cgroupRoot,
      pauseImage: pauseImageRef(),
      containerdSocket,
    };
    await runOnNode('node-setup', 'bash', [join(HERE, 'node-setup.sh'), root, NODE_IP, SERVICE_CIDR]);
    const pki = await makePki(join(root, 'pki'), NODE_NAME, NODE_IP, API_SERVICE_IP);
    const caPem = readFileSync(pki.caCert, 'utf8');
    const inNode = `https://${NODE_IP}:6443`;
    const kc = async (name: string, token: string, user: string) => {
      const p = join(root, `${name}.kubeconfig`);
      await writeFile(p, kubeconfig(inNode, caPem, token, user), { mode: 0o600 });
      return p;
    };

    // Control plane.
    startOnNode('etcd', binaryPath('etcd'), [
      `--data-dir=${join(root, 'etcd')}`,
      '--listen-client-urls=http://127.0.0.1:2379',
      '--advertise-client-urls=http://127.0.0.1:2379',
      '--listen-peer-urls=http://127.0.0.1:2380',
      '--initial-advertise-peer-urls=http://127.0.0.1:2380',
      '--initial-cluster=default=http://127.0.0.1:2380',
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ]);
    startOnNode('kube-apiserver', binaryPath('kube-apiserver'), [
      '--etcd-servers=http://127.0.0.1:2379',
      '--bind-address=0.0.0.0',
      '--secure-port=6443',
      `--advertise-address=${NODE_IP}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      '--allow-privileged=true',
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
      `--token-auth-file=${pki.tokenFile}`,
      `--client-ca-file=${pki.caCert}`,
      `--tls-cert-file=${pki.apiserverCert}`,
      `--tls-private-key-file=${pki.apiserverKey}`,
      `--kubelet-client-certificate=${pki.kubeletClientCert}`,
      `--kubelet-client-key=${pki.kubeletClientKey}`,
      '--kubelet-preferred-address-types=InternalIP,Hostname',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${pki.saPub}`,
      `--service-account-signing-key-file=${pki.saKey}`,
      '--profiling=false',
      '--v=0',
    ]);
    startOnNode('relay-apiserver', process.execPath, [
      join(HERE, 'relay.ts'),
      `unix:${join(root, 'sock', 'apiserver')}`,
      `tcp:${NODE_IP}:6443`,
    ]);
    const apiPort = await forwardFromRunner(relays, join(root, 'sock', 'apiserver'));
    const server = `https://127.0.0.1:${apiPort}`;
    const kubeconfigPath = join(root, 'admin.kubeconfig');
    await writeFile(kubeconfigPath, kubeconfig(server, caPem, pki.tokens.admin, 'admin'), { mode: 0o600 });
    const kubectl = (...args: string[]) =>
      exec(binaryPath('kubectl'), ['--kubeconfig', kubeconfigPath, ...args], { maxBuffer: 16 << 20 });
    await waitFor(
      'kube-apiserver /readyz',
      async () => {
        await kubectl('get', '--raw', '/readyz');
        return true;
      },
      CLUSTER_START_TIMEOUT_MS,
      200,
    );

    startOnNode('kube-controller-manager', binaryPath('kube-controller-manager'), [
      `--kubeconfig=${await kc('controller-manager', pki.tokens.controllerManager, 'kube-controller-manager')}`,
      '--controllers=*',
      '--leader-elect=false',
      '--use-service-account-credentials=true',
      `--service-account-private-key-file=${pki.saKey}`,
      `--root-ca-file=${pki.caCert}`,
      `--cluster-signing-cert-file=${pki.caCert}`,
      `--cluster-signing-key-file=${pki.caKey}`,
      '--bind-address=127.0.0.1',
      '--concurrent-gc-syncs=5',
    ]);
    startOnNode('kube-scheduler', binaryPath('kube-scheduler'), [
      `--kubeconfig=${await kc('scheduler', pki.tokens.scheduler, 'system:kube-scheduler')}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
    ]);

    // Node: containerd, images, kubelet, kube-proxy.
    await mkdir(join(root, 'cni', 'net.d'), { recursive: true });
    await writeFile(join(root, 'cni', 'net.d', '10-apphost-test.conflist'), cniConfig(layout));
    await writeFile(join(root, 'containerd.toml'), containerdConfig(layout));
    startOnNode('containerd', binaryPath('containerd'), ['--config', join(root, 'containerd.toml')]);
    const ctr = (...args: string[]) =>
      exec(binaryPath('ctr'), ['--address', containerdSocket, '--namespace', 'k8s.io', ...args], {
        maxBuffer: 16 << 20,
      });
    await waitFor(
      'containerd',
      succeeds(() => ctr('version')),
      CLUSTER_START_TIMEOUT_MS,
      100,
    );
    await importImages(ctr, ['pause', 'coredns']);

    await writeFile(join(root, 'kubelet.yaml'), kubeletConfig(layout, pki.caCert));
    // containerd-shim-runc-v2 is found next to containerd on PATH.
    startOnNode('kubelet', 'env', [
      `PATH=${join(binaryPath('containerd'), '..')}:/usr/sbin:/usr/bin:/sbin:/bin`,
      binaryPath('kubelet'),
      `--config=${join(root, 'kubelet.yaml')}`,
      `--kubeconfig=${await kc('kubelet', pki.tokens.node, `system:node:${NODE_NAME}`)}`,
      `--root-dir=${join(root, 'kubelet')}`,
      `--node-ip=${NODE_IP}`,
      `--hostname-override=${NODE_NAME}`,
      '--v=1',
    ]);
    await writeFile(
      join(root, 'kube-proxy.yaml'),
      kubeProxyConfig(layout, await kc('kube-proxy', pki.tokens.proxy, 'system:kube-proxy')),
    );
    startOnNode('kube-proxy', binaryPath('kube-proxy'), [`--config=${join(root, 'kube-proxy.yaml')}`]);

    await waitFor(
      `node ${NODE_NAME} registered`,
      succeeds(() => kubectl('get', 'node', NODE_NAME)),
      CLUSTER_START_TIMEOUT_MS,
      200,
    );
    await kubectl(
      'wait',
      '--for=condition=Ready',
      `node/${NODE_NAME}`,
      `--timeout=${CLUSTER_START_TIMEOUT_MS / 1000}s`,
    );

    const coredns = readFileSync(join(HERE, 'manifests', 'coredns.yaml'), 'utf8')
      .replaceAll('__IMAGE__', imageRef('coredns'))
      .replaceAll('__DNS_IP__', DNS_IP);
    await writeFile(join(root, 'coredns.yaml'), coredns);
    await kubectl('apply', '-f', join(root, 'coredns.yaml'));

    // The ingress: Caddy on the node's :80/:443, configured from Ingresses by the test fixture.
    const adminSocket = join(root, 'sock', 'caddy-admin');
    await writeFile(join(root, 'caddy.json'), JSON.stringify(caddyConfig(adminSocket, [], [])));
    startOnNode('caddy', binaryPath('caddy'), ['run', '--config', join(root, 'caddy.json')]);
    await waitFor('caddy admin socket', async () => existsSync(adminSocket), CLUSTER_START_TIMEOUT_MS, 100);
    const adminKc = new KubeConfig();
    adminKc.loadFromFile(kubeconfigPath);
    const ingress = await startIngressSync(adminKc, adminSocket, NODE_IP);
    const forward = async (name: string, target: string) => {
      const sock = join(root, 'sock', name);
      startOnNode(`relay-${name}`, process.execPath, [
        join(HERE, 'relay.ts'),
        `unix:${sock}`,
        `tcp:${target}`,
      ]);
      return forwardFromRunner(relays, sock);
    };
    const ingressHttpPort = await forward('ingress-http', `${NODE_IP}:80`);
    const ingressHttpsPort = await forward('ingress-https', `${NODE_IP}:443`);
    await kubectl(
      '-n',
      'kube-system',
      'rollout',
      'status',
      'deploy/coredns',
      `--timeout=${CLUSTER_START_TIMEOUT_MS / 1000}s`,
    );

    return {
      root,
      id,
      holderPid,
      keeperPid,
      kubeconfigPath,
      containerdSocket,
      cgroupRoot,
      nodeIp: NODE_IP,
      ingressHttpPort,
      ingressHttpsPort,
      ingress,
      startOnNode,
      forward,
      stop: async () => {
        ingress.stop();
        await stop();
      },
    };
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
}

/** A 127.0.0.1 port in the runner relaying to the Unix socket `sock` (waits until the socket exists). */
async function forwardFromRunner(relays: Server[], sock: string): Promise<number> {
  await waitFor(`relay socket ${sock}`, async () => existsSync(sock), 30_000, 50);
  const server = await relayServer({ tcp: { host: '127.0.0.1', port: 0 } }, { unix: sock });
  relays.push(server);
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('relay: no port');
  return addr.port;
}

/** A waitFor check that passes once `fn` resolves. */
const succeeds = (fn: () => Promise<unknown>) => async () => {
  await fn();
  return true;
};

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface BuiltImage {
  ref: string;
  archive: string;
  digest: string;
}

const IMAGES_JSON = join(HERE, '..', '..', 'build', 'images', 'images.json');

/** The archives `make images` and `hack/images/build.ts test` wrote. */
export function builtImages(): Record<string, BuiltImage> {
  if (!existsSync(IMAGES_JSON)) {
    throw new Error(`${IMAGES_JSON} is missing; fix: make images images-test`);
  }
  return JSON.parse(readFileSync(IMAGES_JSON, 'utf8'));
}

export function imageRef(name: string): string {
  const img = builtImages()[name];
  if (!img) throw new Error(`image '${name}' was not built; fix: make images images-test`);
  return img.ref;
}

function pauseImageRef(): string {
  return imageRef('pause');
}

async function importImages(
  ctr: (...args: string[]) => Promise<{ stdout: string }>,
  names: string[],
): Promise<void> {
  const all = builtImages();
  for (const name of names) {
    const img = all[name];
    if (!img) throw new Error(`image '${name}' was not built; fix: make images images-test`);
    await ctr('images', 'import', '--platform', 'linux/amd64', img.archive).catch((err) => {
      throw new Error(
        `ctr images import ${img.archive} failed: ${String(err)}; fix: make images images-test`,
      );
    });
  }
}

export { importImages };
