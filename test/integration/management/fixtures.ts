/** Test fixtures for the management API: CRDs, project namespaces, apps, and in-memory run/delivery readers. */
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  loadAllYaml,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { API_VERSION, APP_PLURAL, GROUP, PROJECT_LABEL, VERSION } from '../../../src/apis/v1alpha1/types.ts';
import type { DeliveryReader, RunReader } from '../../../src/management/readers.ts';
import type { RunRecord, WebhookDeliveryRecord } from '../../../src/shared/contracts/messaging.ts';

export const uniqueId = (prefix: string) => `${prefix}-${randomBytes(3).toString('hex')}`;

function minimalCrd(kind: string, plural: string): V1CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true },
          },
        },
      ],
    },
  };
}

/** The project's CRDs from crds/ when they are there, else minimal stand-ins; waits until established. */
export async function ensureCrds(kc: KubeConfig): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const dir = join(import.meta.dirname, '../../../crds');
  const fromRepo: V1CustomResourceDefinition[] = existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'))
        .flatMap((f) => loadAllYaml(readFileSync(join(dir, f), 'utf8')) as V1CustomResourceDefinition[])
        .filter((d) => d?.kind === 'CustomResourceDefinition')
    : [];
  const wanted = new Map<string, V1CustomResourceDefinition>([
    [`${APP_PLURAL}.${GROUP}`, minimalCrd('App', APP_PLURAL)],
    [`domainassignments.${GROUP}`, minimalCrd('DomainAssignment', 'domainassignments')],
  ]);
  for (const crd of fromRepo) if (crd.metadata?.name) wanted.set(crd.metadata.name, crd);
  for (const [name, body] of wanted) {
    try {
      await api.readCustomResourceDefinition({ name });
    } catch {
      try {
        await api.createCustomResourceDefinition({ body });
      } catch (err) {
        if ((err as { code?: number }).code !== 409) throw err;
      }
    }
  }
  const deadline = Date.now() + 30_000;
  for (const name of wanted.keys()) {
    for (;;) {
      const crd = await api.readCustomResourceDefinition({ name });
      if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new Error(`CRD ${name} not established in 30 s`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  // Established is not yet servable: the apiserver answers 429 while the new storage initialises.
  const custom = kc.makeApiClient(CustomObjectsApi);
  for (const plural of [APP_PLURAL, 'domainassignments']) {
    for (;;) {
      try {
        await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural });
        break;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }
}

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
    async list(p, a, { state, limit }) {
      return records_
        .filter((r) => r.projectId === p && r.appName === a && (!state || r.state === state))
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
