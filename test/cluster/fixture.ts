/**
 * What a cluster-suite test file uses (see docs/testing.md, "Tests on the real cluster"):
 *
 *   const kc = clusterKubeConfig();                 // @kubernetes/client-node, admin
 *   await kubectl('get', 'pods', '-A');             // the pinned kubectl, admin kubeconfig
 *   await helm(['upgrade', ...]);                   // the pinned helm
 *   const res = await ingressRequest(API_HOST, '/v4/p/app/run', { method: 'POST', ... });
 *   const hook = await exposeToPods(server);        // a runner-side HTTP server, reachable from pods
 *   await loadImage('build/images/my.oci.tar');     // into the node's containerd
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { Agent, buildConnector, type Dispatcher, request } from 'undici';
import { inject } from 'vitest';
import { binaryPath } from '../harness/binaries.ts';
import { freePort, waitFor } from '../harness/process.ts';
import { startOnNode as onNode } from './on-node.ts';
import { helm as helmIn, loadImageArchive } from './platform.ts';

export { API_HOST, MANAGEMENT_HOST, PLATFORM_NAMESPACE, PLATFORM_RELEASE } from './platform.ts';

const exec = promisify(execFile);
const HERE = import.meta.dirname;

export const info = () => inject('cluster');

export function clusterKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(info().kubeconfigPath);
  return kc;
}

export async function kubectl(...args: string[]): Promise<string> {
  const { stdout } = await exec(binaryPath('kubectl'), ['--kubeconfig', info().kubeconfigPath, ...args], {
    maxBuffer: 64 << 20,
    timeout: 300_000,
  });
  return stdout;
}

/** `kubectl apply -f -` of `yaml` in `namespace`. */
export async function kubectlApply(namespace: string, yaml: string): Promise<string> {
  const child = exec(
    binaryPath('kubectl'),
    ['--kubeconfig', info().kubeconfigPath, '-n', namespace, 'apply', '-f', '-'],
    {
      maxBuffer: 16 << 20,
      timeout: 120_000,
    },
  );
  child.child.stdin?.end(yaml);
  return (await child).stdout;
}

export const helm = (args: string[], timeoutMs?: number) => helmIn(info().kubeconfigPath, args, timeoutMs);

/** An undici dispatcher that sends every request, whatever its URL, to the ingress (TLS on :443). */
export function ingressDispatcher(): Dispatcher {
  const { ingressHttpPort, ingressHttpsPort } = info();
  const connector = buildConnector({ rejectUnauthorized: false });
  return new Agent({
    connect: (opts, cb) => {
      const tls = opts.protocol === 'https:';
      connector(
        {
          ...opts,
          hostname: '127.0.0.1',
          port: String(tls ? ingressHttpsPort : ingressHttpPort),
          ...(tls ? { servername: opts.hostname } : {}),
        },
        cb,
      );
    },
  });
}

/** A request to the ingress with the Host a user would send (http, or https for TLS rules). */
export async function ingressRequest(
  host: string,
  path: string,
  opts: Omit<Parameters<typeof request>[1] & object, 'dispatcher'> & { https?: boolean } = {},
) {
  const { https, ...rest } = opts;
  return request(`${https ? 'https' : 'http'}://${host}${path}`, {
    ...rest,
    dispatcher: ingressDispatcher(),
  });
}

/** Imports an image archive (OCI or docker-archive) into the node, as `kind load image-archive` does. */
export const loadImage = (archive: string) => loadImageArchive(info().containerdSocket, archive);

/** Runs `cmd` on the node (its network, mount and PID namespaces); logs in <root>/logs/<name>.log. */
export const startOnNode = (name: string, cmd: string, args: string[]) =>
  onNode(info().holderPid, info().root, name, cmd, args);

/**
 * Makes a runner-side HTTP server reachable from pods at `http://<node address>:<port>` (e.g. a webhook
 * receiver; add the node address to webhooks.allowCidrs). The server is moved onto a Unix socket.
 */
export async function exposeToPods(server: Server): Promise<{ url: string; close(): Promise<void> }> {
  const dir = mkdtempSync(join(info().root, 'sock', 'expose-'));
  const sock = join(dir, 's');
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(sock, resolve);
  });
  const port = await freePort();
  const relay = startOnNode(`expose-${port}`, process.execPath, [
    join(HERE, 'relay.ts'),
    `tcp:${info().nodeIp}:${port}`,
    `unix:${sock}`,
  ]);
  const url = `http://${info().nodeIp}:${port}`;
  // Listening once the node accepts a connection there (a probe from inside the namespace).
  await waitFor(
    `relay ${url}`,
    async () => {
      const probe = startOnNode(`probe-${port}`, 'bash', ['-c', `exec 3<>/dev/tcp/${info().nodeIp}/${port}`]);
      return (await probe.exited) === 0;
    },
    30_000,
    100,
  );
  return {
    url,
    close: async () => {
      relay.kill();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export const uniqueName = (prefix: string) => `${prefix}-${randomBytes(3).toString('hex')}`;

/** A project: a namespace labelled apphost.dev/project=<name>. */
export async function createProject(kc: KubeConfig, name = uniqueName('proj')): Promise<string> {
  await kc.makeApiClient(CoreV1Api).createNamespace({
    body: { metadata: { name, labels: { 'apphost.dev/project': name } } },
  });
  return name;
}
