/**
 * Which namespace holds a project: the one labelled `apphost.dev/project=<project_id>` that is not being
 * deleted. Lookups are reused for `cacheMs`, so a new or deleted project is seen within that bound.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { isLabelValue } from '../../apis/names.ts';
import { PROJECT_LABEL } from '../../apis/v1alpha1/types.ts';

export interface ProjectNamespaces {
  namespaceOf(projectId: string): Promise<string | undefined>;
}

export function createProjectNamespaces(
  kc: KubeConfig,
  opts: { cacheMs: number; now?: () => number },
): ProjectNamespaces {
  const core = kc.makeApiClient(CoreV1Api);
  const now = opts.now ?? Date.now;
  const cache = new Map<string, { namespace: string | undefined; at: number }>();
  return {
    async namespaceOf(projectId) {
      if (projectId === '' || !isLabelValue(projectId)) return undefined;
      const t = now();
      const hit = cache.get(projectId);
      if (hit && t - hit.at < opts.cacheMs) return hit.namespace;
      const list = await core.listNamespace({ labelSelector: `${PROJECT_LABEL}=${projectId}` });
      const ns = list.items.find((n) => n.status?.phase !== 'Terminating' && !n.metadata?.deletionTimestamp);
      if (cache.size > 10_000) cache.clear();
      cache.set(projectId, { namespace: ns?.metadata?.name, at: t });
      return ns?.metadata?.name;
    },
  };
}
