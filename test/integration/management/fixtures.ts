/** Test fixtures for the management API: CRDs, project namespaces, apps, and in-memory run/delivery readers. */
import { randomBytes } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, APP_PLURAL, GROUP, PROJECT_LABEL, VERSION } from '../../../src/apis/v1alpha1/types.ts';
import type { DeliveryReader, RunReader } from '../../../src/management/readers.ts';
import type { RunRecord, WebhookDeliveryRecord } from '../../../src/shared/contracts/messaging.ts';

export const uniqueId = (prefix: string) => `${prefix}-${randomBytes(3).toString('hex')}`;

/** A project namespace (named differently from the project id, as a real cluster may do). */
export async function createProjectNamespace(kc: KubeConfig, projectId: string): Promise<string> {
  const name = `mgmt-${projectId}`.slice(0, 63);
  await kc
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name, labels: { [PROJECT_LABEL]: projectId } } } });
  return name;
}

export async function createNamespace(kc: KubeConfig, name: string): Promise<void> {
  try {
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  } catch (err) {
    if ((err as { code?: number }).code !== 409) throw err;
  }
}

export async function createAppCr(kc: KubeConfig, namespace: string, name: string): Promise<void> {
  await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: APP_PLURAL,
    body: {
      apiVersion: API_VERSION,
      kind: 'App',
      metadata: { name },
      spec: { runtime: 'cortex', image: 'example/hello:1' },
    },
  });
}

export async function deleteNamespaces(kc: KubeConfig, names: string[]): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await Promise.all(names.map((name) => core.deleteNamespace({ name }).catch(() => undefined)));
}

/** A RunReader over a plain map, for tests that are not about the run worker. */
export function memoryRuns(records: RunRecord[] = []): RunReader & { records: RunRecord[] } {
  const records_ = records;
  const find = (p: string, a: string, id: string) =>
    records_.find((r) => r.projectId === p && r.appName === a && r.runId === id);
  return {
    records: records_,
    async get(p, a, id) {
      const r = find(p, a, id);
      return r ? { ...r } : undefined;
    },
    async find(p, id) {
      const r = records_.find((x) => x.projectId === p && x.runId === id);
      return r ? { ...r } : undefined;
    },
    async getResult() {
      return undefined;
    },
    async list(p, a, { state, limit, mode }) {
      return records_
        .filter(
          (r) =>
            r.projectId === p &&
            (a === undefined || r.appName === a) &&
            (!state || r.state === state) &&
            (!mode || (r.mode ?? 'async') === mode),
        )
        .sort((x, y) => y.createdAt.localeCompare(x.createdAt))
        .slice(0, limit ?? 20)
        .map((r) => ({ ...r }));
    },
    async requestCancel(p, a, id) {
      const r = find(p, a, id);
      if (!r) return undefined;
      r.cancelRequested = true;
      return { ...r };
    },
  };
}

export function memoryDeliveries(records: WebhookDeliveryRecord[] = []): DeliveryReader {
  return {
    async get(id) {
      return records.find((d) => d.requestId === id);
    },
  };
}
