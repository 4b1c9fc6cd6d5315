/**
 * An in-memory KubeClient for reconciler table tests: records every write and can be told to fail
 * a verb on a resource. Not a model of the API server (no defaulting, no watches).
 */
import type { KubeClient } from '../client.ts';
import { KubeApiError } from '../errors.ts';
import type { KubeObject, ObjectRef, ObjectWithMeta, ResourceType } from '../objects.ts';

export interface RecordedWrite {
  verb: string;
  resource: string;
  name: string;
  body: unknown;
}

export interface FakeKubeClient extends KubeClient {
  writes: RecordedWrite[];
  /** Makes `verb` on `resource` (plural) throw this status until cleared. */
  failOn(verb: string, resource: string, statusCode?: number): void;
  seed(type: ResourceType, obj: KubeObject): void;
  stored(type: ResourceType, ref: ObjectRef): KubeObject | undefined;
}

const key = (type: ResourceType, ref: ObjectRef) => `${type.plural}/${ref.namespace ?? ''}/${ref.name}`;
const clone = <T>(v: T): T => structuredClone(v);

export function createFakeKubeClient(): FakeKubeClient {
  const store = new Map<string, KubeObject>();
  const failures = new Map<string, number>();
  const writes: RecordedWrite[] = [];
  let rv = 1;

  const write = (verb: string, type: ResourceType, name: string, body: unknown) => {
    const code = failures.get(`${verb}/${type.plural}`);
    if (code) throw new KubeApiError(code, 'Injected', `injected failure: ${verb} ${type.plural}`);
    writes.push({ verb, resource: type.plural, name, body: clone(body) });
  };
  const put = (type: ResourceType, obj: ObjectWithMeta): KubeObject => {
    const stored: KubeObject = clone({
      ...obj,
      metadata: { ...obj.metadata, resourceVersion: String(++rv) },
    });
    store.set(key(type, obj.metadata), stored);
    return clone(stored);
  };

  return {
    writes,
    failOn(verb, resource, statusCode = 500) {
      failures.set(`${verb}/${resource}`, statusCode);
    },
    seed: (type, obj) => {
      put(type, obj);
    },
    stored: (type, ref) => store.get(key(type, ref)),
    async get<T extends ObjectWithMeta>(type: ResourceType, ref: ObjectRef) {
      const o = store.get(key(type, ref));
      return (o ? clone(o) : undefined) as T | undefined;
    },
    async list<T extends ObjectWithMeta>(type: ResourceType) {
      const items = [...store.entries()]
        .filter(([k]) => k.startsWith(`${type.plural}/`))
        .map(([, o]) => clone(o));
      return { items: items as unknown as T[], resourceVersion: String(rv) };
    },
    async watch() {
      throw new Error('the fake client does not watch');
    },
    async create<T extends ObjectWithMeta>(type: ResourceType, obj: T) {
      write('create', type, obj.metadata.name, obj);
      if (store.has(key(type, obj.metadata))) throw new KubeApiError(409, 'AlreadyExists', 'already exists');
      return put(type, obj) as unknown as T;
    },
    async replace<T extends ObjectWithMeta>(type: ResourceType, obj: T) {
      write('update', type, obj.metadata.name, obj);
      const cur = store.get(key(type, obj.metadata));
      if (
        cur &&
        obj.metadata.resourceVersion &&
        cur.metadata.resourceVersion !== obj.metadata.resourceVersion
      ) {
        throw new KubeApiError(409, 'Conflict', 'the object has been modified');
      }
      return put(type, obj) as unknown as T;
    },
    async apply<T extends ObjectWithMeta>(type: ResourceType, obj: T) {
      write('apply', type, obj.metadata.name, obj);
      const cur = store.get(key(type, obj.metadata));
      return put(type, { ...(cur ?? {}), ...obj, status: cur?.status }) as unknown as T;
    },
    async mergePatch<T extends ObjectWithMeta>(
      type: ResourceType,
      ref: ObjectRef,
      patch: unknown,
      subresource?: 'status',
    ) {
      write(subresource ? `patch-${subresource}` : 'patch', type, ref.name, patch);
      const cur = store.get(key(type, ref));
      if (!cur) throw new KubeApiError(404, 'NotFound', `${type.plural} "${ref.name}" not found`);
      const p = patch as { metadata?: Record<string, unknown>; status?: unknown; spec?: unknown };
      const next = clone(cur);
      if (p.metadata) next.metadata = { ...next.metadata, ...p.metadata } as KubeObject['metadata'];
      if (p.status !== undefined) next.status = p.status;
      if (p.spec !== undefined) next.spec = { ...(next.spec as object | undefined), ...(p.spec as object) };
      return put(type, next) as unknown as T;
    },
    async delete(type, ref) {
      write('delete', type, ref.name, undefined);
      return store.delete(key(type, ref));
    },
  };
}
