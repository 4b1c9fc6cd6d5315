/**
 * The cluster suite's shared world, started once per `make test-cluster`: a real single-node cluster
 * (node.ts) with apphost's images loaded and the chart installed (platform.ts). Test files reach it
 * through fixture.ts.
 */
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { TestProject } from 'vitest/node';
import { startCluster } from './node.ts';
import { DATA_PLANE, installPlatform, loadImages, PLATFORM_NAMESPACE } from './platform.ts';

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
  let readyBreakdown = '';
  try {
    const t1 = Date.now();
    await loadImages(cluster.containerdSocket, ['apphost', 'runtime-python', 'nats']);
    timings.imagesImportedMs = Date.now() - t1;
    const t2 = Date.now();
    await installPlatform(cluster.kubeconfigPath);
    timings.platformReadyMs = Date.now() - t2;
    readyBreakdown = await podsReadyAfter(cluster.kubeconfigPath, t2).catch((err) => `(${String(err)})`);
  } catch (err) {
    process.stderr.write(
      `cluster suite: setup failed; logs in ${cluster.root}/logs (kept: APPHOST_TEST_KEEP_DIRS=1)\n`,
    );
    await cluster.stop();
    throw err;
  }
  process.stderr.write(
    `cluster suite (gateway.dataPlane: ${DATA_PLANE}): node Ready + DNS + ingress ${timings.clusterReadyMs} ms, images ${timings.imagesImportedMs} ms, helm install → all Ready ${timings.platformReadyMs} ms (${cluster.root})\ncluster suite: platform pods Ready after helm install started (s, restarts): ${readyBreakdown}\n`,
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

/** Per platform pod: seconds from `since` to its Ready condition (API time, 1 s resolution) and its restarts. */
async function podsReadyAfter(kubeconfigPath: string, since: number): Promise<string> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const pods = await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: PLATFORM_NAMESPACE });
  return pods.items
    .map((p) => {
      const ready = p.status?.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime;
      const restarts = (p.status?.containerStatuses ?? []).reduce((n, c) => n + c.restartCount, 0);
      const at = ready ? ((new Date(ready).getTime() - since) / 1000).toFixed(0) : '?';
      return `${p.metadata?.name} ${at} s, ${restarts}`;
    })
    .sort()
    .join('; ');
}
