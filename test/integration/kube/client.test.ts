/**
 * The shared KubeClient (src/shared/kube/client.ts) against the real API server: what client-node's own
 * object client does not give us (wire-form objects, the status subresource, no discovery) and what the
 * operator relies on (server-side apply ownership, merge patches, list + watch).
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, type App } from '../../../src/apis/v1alpha1/types.ts';
import { createKubeClient, type WatchEvent } from '../../../src/shared/kube/client.ts';
import { isNotFound } from '../../../src/shared/kube/errors.ts';
import { type KubeObject, type Lease, Resources } from '../../../src/shared/kube/objects.ts';
import { applyProjectCrds } from '../../harness/crds.ts';
import { createTestNamespace, testKubeConfig } from '../../harness/kube.ts';

const kc = testKubeConfig();
const client = createKubeClient(kc, {
  fieldManager: 'apphost-client-test',
  requestTimeoutMs: 30_000,
  watchIdleTimeoutMs: 120_000,
});
let ns: string;

beforeAll(async () => {
  await applyProjectCrds();
  ns = await createTestNamespace(kc, 'kube-client');
});
afterAll(async () => {
  if (ns)
    await kc
      .makeApiClient(CoreV1Api)
      .deleteNamespace({ name: ns })
      .catch(() => undefined);
});

const app = (name: string): App => ({
  apiVersion: API_VERSION,
  kind: 'App',
  metadata: { name, namespace: ns },
  spec: { runtime: 'cortex', image: 'example/app:1' },
});

describe('KubeClient on client-node', () => {
  it('keeps objects in wire form: a Lease with MicroTime stamps is written, read and written again', async () => {
    // client-node's models would turn these into Dates and send them back with 3 fractional digits,
    // which the API server refuses for MicroTime (kubernetes-client/javascript#828).
    const stamp = '2026-01-02T03:04:05.123456Z';
    await client.create<Lease>(Resources.Lease, {
      metadata: { name: 'wire', namespace: ns },
      spec: { holderIdentity: 'a', leaseDurationSeconds: 15, acquireTime: stamp, renewTime: stamp },
    });
    const read = await client.get<Lease>(Resources.Lease, { namespace: ns, name: 'wire' });
    expect(read?.spec?.renewTime).toBe(stamp);
    expect(typeof read?.metadata.creationTimestamp).toBe('string');
    const again = await client.replace<Lease>(Resources.Lease, {
      ...(read as Lease),
      spec: { ...read?.spec, holderIdentity: 'b' },
    });
    expect(again.spec).toMatchObject({ holderIdentity: 'b', acquireTime: stamp });
  });

  it('answers undefined for a missing object and false for deleting one, on a built-in and a custom kind', async () => {
    expect(await client.get(Resources.Deployment, { namespace: ns, name: 'none' })).toBeUndefined();
    expect(await client.get(Resources.App, { namespace: ns, name: 'none' })).toBeUndefined();
    expect(await client.delete(Resources.App, { namespace: ns, name: 'none' })).toBe(false);
  });

  it('addresses a kind without discovery: an unknown CRD is a 404, not a lookup failure', async () => {
    const missing = { apiVersion: 'nothing.apphost.dev/v1', kind: 'Nope', plural: 'nopes', namespaced: true };
    await expect(client.list(missing, { namespace: ns })).rejects.toSatisfy(isNotFound);
  });

  it('applies with its field manager, patches status through the subresource and spec without it', async () => {
    const applied = await client.apply<App>(Resources.App, app('owned'));
    const managers = (applied.metadata as { managedFields?: Array<{ manager: string; operation: string }> })
      .managedFields;
    expect(managers).toContainEqual(
      expect.objectContaining({ manager: 'apphost-client-test', operation: 'Apply' }),
    );

    const status = { observedGeneration: 1, conditions: [] };
    const afterStatus = await client.mergePatch<App>(
      Resources.App,
      { namespace: ns, name: 'owned' },
      { status, spec: { image: 'ignored/by-status:1' } },
      'status',
    );
    expect(afterStatus.status).toMatchObject({ observedGeneration: 1 });
    expect(afterStatus.spec.image).toBe('example/app:1');

    const afterSpec = await client.mergePatch<App>(
      Resources.App,
      { namespace: ns, name: 'owned' },
      { spec: { image: 'example/app:2' }, status: { observedGeneration: 9 } },
    );
    expect(afterSpec.spec.image).toBe('example/app:2');
    expect(afterSpec.status?.observedGeneration).toBe(1);
  });

  it('drops a field the schema does not declare from an apply, as the default field validation did', async () => {
    // Applies send fieldValidation=Ignore (client.ts). The default, Warn, also stored the object without
    // the field; it only added a warning header, which client-node does not surface.
    const applied = await client.apply<KubeObject>(Resources.Service, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'undeclared', namespace: ns },
      spec: { ports: [{ port: 80 }], bogusField: true },
    });
    expect(applied.spec).toMatchObject({ ports: [expect.objectContaining({ port: 80 })] });
    expect(applied.spec).not.toHaveProperty('bogusField');
  });

  it('lists with kind filled in, and watches from the list version', async () => {
    await client.create(Resources.App, app('listed'));
    const { items, resourceVersion } = await client.list<App>(Resources.App, { namespace: ns });
    expect(items.map((a) => [a.kind, a.metadata.name])).toContainEqual(['App', 'listed']);

    const seen: Array<WatchEvent<KubeObject>> = [];
    const abort = new AbortController();
    const watching = client.watch<KubeObject>(Resources.App, {
      namespace: ns,
      resourceVersion,
      timeoutSeconds: 60,
      signal: abort.signal,
      onEvent: (ev) => {
        seen.push(ev);
        if (ev.type === 'ADDED' && ev.object.metadata.name === 'watched') abort.abort();
      },
    });
    await client.create(Resources.App, app('watched'));
    await watching;
    expect(seen.filter((e) => e.type !== 'BOOKMARK').map((e) => [e.type, e.object.metadata.name])).toEqual([
      ['ADDED', 'watched'],
    ]);
  });
});
