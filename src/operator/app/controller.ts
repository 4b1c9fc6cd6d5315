/** Wiring for Apps: which informer events enqueue which App keys. */
import type { App } from '../../apis/v1alpha1/types.ts';
import type { InformerHandlers } from '../runtime/informer.ts';
import { objectKey } from '../runtime/informer.ts';
import type { ObjectWithMeta } from '../runtime/kube-client.ts';

/** The App that controls an owned object (Deployment, Service), by its controller owner reference. */
export function ownerAppKey(obj: ObjectWithMeta): string | undefined {
  const ref = obj.metadata.ownerReferences?.find((r) => r.controller && r.kind === 'App');
  return ref && obj.metadata.namespace ? `${obj.metadata.namespace}/${ref.name}` : undefined;
}

export function appHandlers(enqueue: (key: string) => void): InformerHandlers<App> {
  const add = (o: App) => enqueue(objectKey(o));
  return { onAdd: add, onUpdate: add, onDelete: add, onResync: add };
}

/** Changes to owned objects (drift, deletion, rollout progress) bring their App back. */
export function ownedHandlers<T extends ObjectWithMeta>(enqueue: (key: string) => void): InformerHandlers<T> {
  const add = (o: T) => {
    const key = ownerAppKey(o);
    if (key) enqueue(key);
  };
  return { onAdd: add, onUpdate: add, onDelete: add };
}
