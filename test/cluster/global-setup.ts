/**
 * The cluster suite's shared world, started once per `make test-cluster`: a real single-node cluster
 * (node.ts) with apphost's images loaded and the chart installed (platform.ts). Test files reach it
 * through fixture.ts.
 */
import type { TestProject } from 'vitest/node';
import { startCluster } from './node.ts';
import { installPlatform, loadImages, PLATFORM_NAMESPACE } from './platform.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    cluster: {
      root: string;
      holderPid: number;
      keeperPid: number;
      kubeconfigPath: string;
      containerdSocket: string;
      cgroupRoot: string;
      nodeIp: string;
      ingressHttpPort: number;
      ingressHttpsPort: number;
      platformNamespace: string;
      timings: Record<string, number>;
    };
  }
}

export default async function setup(project: TestProject) {
  const t0 = Date.now();
  const cluster = await startCluster();
  const timings: Record<string, number> = { clusterReadyMs: Date.now() - t0 };
  try {
    const t1 = Date.now();
    await loadImages(cluster.containerdSocket, ['apphost', 'runtime-python', 'nats']);
    timings.imagesImportedMs = Date.now() - t1;
    const t2 = Date.now();
    await installPlatform(cluster.kubeconfigPath);
    timings.platformReadyMs = Date.now() - t2;
  } catch (err) {
    process.stderr.write(
      `cluster suite: setup failed; logs in ${cluster.root}/logs (kept: APPHOST_TEST_KEEP_DIRS=1)\n`,
    );
    await cluster.stop();
    throw err;
  }
  process.stderr.write(
    `cluster suite: node Ready + DNS + ingress ${timings.clusterReadyMs} ms, images ${timings.imagesImportedMs} ms, helm install → all Ready ${timings.platformReadyMs} ms (${cluster.root})\n`,
  );
  project.provide('cluster', {
    root: cluster.root,
    holderPid: cluster.holderPid,
    keeperPid: cluster.keeperPid,
    kubeconfigPath: cluster.kubeconfigPath,
    containerdSocket: cluster.containerdSocket,
    cgroupRoot: cluster.cgroupRoot,
    nodeIp: cluster.nodeIp,
    ingressHttpPort: cluster.ingressHttpPort,
    ingressHttpsPort: cluster.ingressHttpsPort,
    platformNamespace: PLATFORM_NAMESPACE,
    timings,
  });
  return async () => {
    await cluster.stop();
  };
}
