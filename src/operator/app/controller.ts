/** Wiring for Apps: which informer events enqueue which App keys. */
import type { V1Container } from '@kubernetes/client-node';
import type { App } from '../../apis/v1alpha1/types.ts';
import type { InformerHandlers } from '../../shared/kube/informer.ts';
import { objectKey } from '../../shared/kube/informer.ts';
import { type ObjectWithMeta, POD_DELETION_COST, type Pod } from '../../shared/kube/objects.ts';
import { APP_LABEL } from './resources/labels.ts';

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

/** The App a pod runs for, by its `apphost.dev/app` label (pods belong to ReplicaSets, not to the App). */
export function podAppKey(pod: Pod): string | undefined {
  const app = pod.metadata.labels?.[APP_LABEL];
  return app && pod.metadata.namespace ? `${pod.metadata.namespace}/${app}` : undefined;
}

/** A pod's change (scheduled, pulled, crashed, ready) may change why its App is or is not ready. */
export function podHandlers(enqueue: (key: string) => void): InformerHandlers<Pod> {
  const add = (p: Pod) => {
    const key = podAppKey(p);
    if (key) enqueue(key);
  };
  return { onAdd: add, onUpdate: add, onDelete: add };
}

/**
 * What the pod cache keeps: the fields status causes read (and the autoscaler's IP and deletion cost). Pods are the most numerous objects
 * watched; dropping managedFields, env, probes and the like keeps the operator's memory small.
 */
export function slimPod(pod: Pod): Pod {
  const m = pod.metadata;
  const images = (cs: V1Container[] | undefined) => cs?.map((c) => ({ name: c.name, image: c.image }));
  return {
    apiVersion: pod.apiVersion,
    kind: pod.kind,
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      labels: m.labels?.[APP_LABEL] ? { [APP_LABEL]: m.labels[APP_LABEL] } : {},
      // The autoscaler compares before it writes (idle replicas are removed first).
      ...(m.annotations?.[POD_DELETION_COST]
        ? { annotations: { [POD_DELETION_COST]: m.annotations[POD_DELETION_COST] } }
        : {}),
      ...(m.deletionTimestamp ? { deletionTimestamp: m.deletionTimestamp } : {}),
    },
    spec: {
      containers: images(pod.spec?.containers) ?? [],
      ...(pod.spec?.initContainers ? { initContainers: images(pod.spec.initContainers) } : {}),
    },
    status: {
      phase: pod.status?.phase,
      // The autoscaler matches reported per-replica load (`<pod IP>:<port>`) to pods.
      ...(pod.status?.podIP ? { podIP: pod.status.podIP } : {}),
      conditions: pod.status?.conditions,
      containerStatuses: pod.status?.containerStatuses,
      initContainerStatuses: pod.status?.initContainerStatuses,
    },
  } as Pod;
}
