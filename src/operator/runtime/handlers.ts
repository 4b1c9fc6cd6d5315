/** Fans one informer's events out to several handler sets. */
import type { InformerHandlers } from '../../shared/kube/informer.ts';
import type { ObjectWithMeta } from '../../shared/kube/objects.ts';

export function combineHandlers<T extends ObjectWithMeta>(
  ...sets: InformerHandlers<T>[]
): InformerHandlers<T> {
  return {
    onAdd: (o) => {
      for (const s of sets) s.onAdd?.(o);
    },
    onUpdate: (o, old) => {
      for (const s of sets) s.onUpdate?.(o, old);
    },
    onDelete: (o) => {
      for (const s of sets) s.onDelete?.(o);
    },
    onResync: (o) => {
      for (const s of sets) s.onResync?.(o);
    },
  };
}
