/**
 * apphost on the cluster suite's node: the images `make images` built, imported into the node's
 * containerd, and the chart installed as docs/install.md tells a platform team on a bare cluster
 * (values in test/cluster/values-bare-cluster.yaml plus the ingress hosts below; in the node pass,
 * values-node.yaml too).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { binaryPath } from '../harness/binaries.ts';
import { builtImages, NODE_IP } from './node.ts';

const exec = promisify(execFile);
export const REPO = join(import.meta.dirname, '..', '..');
export const CHART = join(REPO, 'charts', 'apphost');
export const BARE_CLUSTER_VALUES = join(import.meta.dirname, 'values-bare-cluster.yaml');
/** The second pass's values (gateway.dataPlane: node), given after the bare-cluster ones. */
export const NODE_VALUES = join(import.meta.dirname, 'values-node.yaml');

/**
 * What serves the gateway pods' port in this run: `native` (the chart's default), or `node` with
 * APPHOST_TEST_CLUSTER_DATA_PLANE=node (make test-cluster's second pass installs with values-node.yaml).
 */
export const DATA_PLANE = dataPlaneOf(process.env.APPHOST_TEST_CLUSTER_DATA_PLANE);

function dataPlaneOf(value: string | undefined): 'node' | 'native' {
  if (value === undefined || value === '' || value === 'native') return 'native';
  if (value === 'node') return 'node';
  throw new Error(`APPHOST_TEST_CLUSTER_DATA_PLANE must be node or native, not '${value}'`);
}

export const PLATFORM_NAMESPACE = 'apphost-system';
export const PLATFORM_RELEASE = 'apphost';
/** Hostnames of {api_url} and {base_url} on the ingress (any name works: the test sends the Host). */
export const API_HOST = 'api.apphost.test';
export const MANAGEMENT_HOST = 'manage.apphost.test';
/** Bound on `helm install --wait` and every platform rollout in the suite. */
export const PLATFORM_READY_TIMEOUT_MS = Number(
  process.env.APPHOST_TEST_PLATFORM_READY_TIMEOUT_MS ?? 300_000,
);

/** Imports archives from build/images into the node's containerd (what `kind load image-archive` does). */
export async function loadImages(containerdSocket: string, names: string[]): Promise<void> {
  const all = builtImages();
  for (const name of names) {
    const img = all[name];
    if (!img) throw new Error(`image '${name}' was not built; fix: make images images-test`);
    await loadImageArchive(containerdSocket, img.archive);
  }
}

export async function loadImageArchive(containerdSocket: string, archive: string): Promise<void> {
  await exec(
    binaryPath('ctr'),
    [
      '--address',
      containerdSocket,
      '--namespace',
      'k8s.io',
      'images',
      'import',
      '--platform',
      'linux/amd64',
      archive,
    ],
    { maxBuffer: 16 << 20 },
  ).catch((err) => {
    throw new Error(`ctr images import ${archive} failed: ${String(err)}`);
  });
}

/** The `--set` values a test install adds to the bare-cluster values file: images and ingress hosts. */
export function platformValues(): string[] {
  const images = builtImages();
  const nats = images.nats?.ref;
  if (!nats) throw new Error('the test NATS image was not built; fix: make images-test');
  const [natsRepo, natsTag] = [nats.slice(0, nats.lastIndexOf(':')), nats.slice(nats.lastIndexOf(':') + 1)];
  return [
    `nats.bundled.image.repository=${natsRepo}`,
    `nats.bundled.image.tag=${natsTag}`,
    'ingress.enabled=true',
    `ingress.api.host=${API_HOST}`,
    `ingress.management.host=${MANAGEMENT_HOST}`,
    // The suite's webhook receivers listen on the node address (fixture.ts exposeToPods).
    `webhooks.allowCidrs={${NODE_IP}/32}`,
  ];
}

export async function helm(kubeconfigPath: string, args: string[], timeoutMs = PLATFORM_READY_TIMEOUT_MS) {
  return exec(binaryPath('helm'), [...args, '--kubeconfig', kubeconfigPath], {
    maxBuffer: 64 << 20,
    timeout: timeoutMs + 30_000,
    cwd: REPO,
    env: { ...process.env, HELM_CACHE_HOME: '/tmp/.helm-cache', HELM_CONFIG_HOME: '/tmp/.helm-config' },
  });
}

/** `helm install` of the chart with the bare-cluster values (and the native ones in that pass); waits for every platform pod Ready. */
export async function installPlatform(kubeconfigPath: string, extra: string[] = []): Promise<void> {
  await helm(kubeconfigPath, [
    'install',
    PLATFORM_RELEASE,
    CHART,
    '--namespace',
    PLATFORM_NAMESPACE,
    '--create-namespace',
    '-f',
    BARE_CLUSTER_VALUES,
    ...(DATA_PLANE === 'node' ? ['-f', NODE_VALUES] : []),
    ...platformValues().flatMap((v) => ['--set', v]),
    ...extra,
    '--wait',
    `--timeout=${PLATFORM_READY_TIMEOUT_MS / 1000}s`,
  ]);
}
