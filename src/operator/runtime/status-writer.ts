import type { KubeClient } from '../../shared/kube/client.ts';
import { isNotFound } from '../../shared/kube/errors.ts';
import type { ObjectWithMeta, ResourceType } from '../../shared/kube/objects.ts';
import { canonicalJson } from './desired-state.ts';

/** Two statuses are the same when their canonical JSON is (key order and absent vs {} do not count). */
export const sameStatus = (a: unknown, b: unknown): boolean =>
  canonicalJson(a ?? {}) === canonicalJson(b ?? {});

/**
 * Writes `status` through the status subresource only when it differs from what the object already
 * reports, so a steady cluster gets no writes. An object deleted since the cache saw it is skipped.
 */
export async function writeStatusIfChanged(
  client: Pick<KubeClient, 'mergePatch'>,
  type: ResourceType,
  obj: ObjectWithMeta & { status?: unknown },
  status: unknown,
  same: (a: unknown, b: unknown) => boolean,
): Promise<void> {
  if (same(obj.status, status)) return;
  try {
    await client.mergePatch(
      type,
      { namespace: obj.metadata.namespace, name: obj.metadata.name },
      { status },
      'status',
    );
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}
