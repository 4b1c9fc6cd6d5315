/** Wiring for DomainAssignments: which informer events enqueue which DomainAssignment keys. */
import type { App, DomainAssignment } from '../../apis/v1alpha1/types.ts';
import type { InformerHandlers } from '../../shared/kube/informer.ts';
import { objectKey } from '../../shared/kube/informer.ts';
import type { ObjectWithMeta } from '../../shared/kube/objects.ts';
import { DOMAIN_ASSIGNMENT_ANNOTATION } from './resources/ingress.ts';

export function domainHandlers(
  enqueue: (key: string) => void,
  all: () => DomainAssignment[],
): InformerHandlers<DomainAssignment> {
  // A hostname freed or taken changes who else may claim it.
  const sameHost = (hostname: string | undefined, self: string) => {
    if (!hostname) return;
    for (const o of all()) if (o.spec.hostname === hostname && objectKey(o) !== self) enqueue(objectKey(o));
  };
  return {
    onAdd: (o) => enqueue(objectKey(o)),
    onUpdate: (o, old) => {
      enqueue(objectKey(o));
      if (old.spec.hostname !== o.spec.hostname) sameHost(old.spec.hostname, objectKey(o));
    },
    onDelete: (o) => {
      enqueue(objectKey(o));
      sameHost(o.spec.hostname, objectKey(o));
    },
    onResync: (o) => enqueue(objectKey(o)),
  };
}

/** An App appearing or going changes the routing of the domains assigned to it. */
export function appToDomainHandlers(
  enqueue: (key: string) => void,
  all: () => DomainAssignment[],
): InformerHandlers<App> {
  const touch = (app: App) => {
    for (const d of all()) {
      if (d.metadata.namespace === app.metadata.namespace && d.spec.appName === app.metadata.name) {
        enqueue(objectKey(d));
      }
    }
  };
  return {
    onAdd: touch,
    onDelete: touch,
    onUpdate: (o, old) => {
      if (Boolean(o.metadata.deletionTimestamp) !== Boolean(old.metadata.deletionTimestamp)) touch(o);
    },
  };
}

export function ingressHandlers<T extends ObjectWithMeta>(
  enqueue: (key: string) => void,
): InformerHandlers<T> {
  const add = (o: T) => {
    const key = o.metadata.annotations?.[DOMAIN_ASSIGNMENT_ANNOTATION];
    if (key) enqueue(key);
  };
  return { onAdd: add, onUpdate: add, onDelete: add };
}

/** The gateway Service (re)appearing or going changes the owner of every domain's Ingress. */
export function gatewayServiceHandlers<T extends ObjectWithMeta>(
  serviceName: string,
  enqueue: (key: string) => void,
  all: () => DomainAssignment[],
): InformerHandlers<T> {
  const touch = (o: T) => {
    if (o.metadata.name !== serviceName) return;
    for (const d of all()) enqueue(objectKey(d));
  };
  return {
    onAdd: touch,
    onDelete: touch,
    onUpdate: (o, old) => {
      if (o.metadata.uid !== old.metadata.uid) touch(o);
    },
  };
}
