/**
 * The platform's one Kubernetes client: get, list, watch, create, replace, server-side apply, merge patch
 * (of an object or its `status`) and delete of any kind in `Resources`, on @kubernetes/client-node —
 * its object client for requests (object-api.ts) and its `Watch` for watches. Objects stay in wire form
 * (objects.ts). Every request is bounded (`requestTimeoutMs`, an AbortSignal set by a client-node
 * middleware); a watch is bounded by client-node's inactivity timeout, set to `watchIdleTimeoutMs`.
 * Errors are client-node's `ApiException` (or a `KubeApiError` for a watch's ERROR event): classify them
 * with errors.ts.
 */
import {
  createConfiguration,
  type KubeConfig,
  type KubernetesObject,
  type Middleware,
  PatchStrategy,
  ServerConfiguration,
  Watch,
} from '@kubernetes/client-node';
import { isNotFound, KubeApiError } from './errors.ts';
import { KUBE_LIST_PAGE_SIZE, type ListPage, listAllPages } from './list-pages.ts';
import { WireObjectApi } from './object-api.ts';
import type { KubeObject, ObjectRef, ObjectWithMeta, ResourceType } from './objects.ts';

export interface ListResult<T extends ObjectWithMeta = KubeObject> {
  items: T[];
  resourceVersion: string;
}

export interface WatchEvent<T extends ObjectWithMeta = KubeObject> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

/** What every write reports, so writes can be counted (a steady cluster must see none). */
export type WriteObserver = (verb: string, type: ResourceType) => void;

export interface KubeClient {
  /** The object, or undefined when it does not exist. */
  get<T extends ObjectWithMeta>(type: ResourceType, ref: ObjectRef): Promise<T | undefined>;
  /** Every object (all pages), with the list's resourceVersion to watch from. */
  list<T extends ObjectWithMeta>(
    type: ResourceType,
    opts?: { namespace?: string; labelSelector?: string; fieldSelector?: string },
  ): Promise<ListResult<T>>;
  /**
   * Streams watch events (bookmarks included) until the server ends the watch, `signal` aborts or the
   * watch is idle for the client's idle bound — all three resolve; a failure (an ERROR event, a refused
   * request) rejects.
   */
  watch<T extends ObjectWithMeta>(
    type: ResourceType,
    opts: {
      resourceVersion: string;
      namespace?: string;
      labelSelector?: string;
      fieldSelector?: string;
      timeoutSeconds: number;
      signal: AbortSignal;
      onEvent: (ev: WatchEvent<T>) => void;
    },
  ): Promise<void>;
  create<T extends ObjectWithMeta>(type: ResourceType, obj: T): Promise<T>;
  replace<T extends ObjectWithMeta>(type: ResourceType, obj: T): Promise<T>;
  /** Server-side apply under the client's field manager, with force (we own what we set). */
  apply<T extends ObjectWithMeta>(type: ResourceType, obj: T): Promise<T>;
  /** JSON merge patch of the object or of its `status` subresource. */
  mergePatch<T extends ObjectWithMeta>(
    type: ResourceType,
    ref: ObjectRef,
    patch: unknown,
    subresource?: 'status',
  ): Promise<T>;
  /** Deletes (background propagation); an already-missing object is not an error (answers false). */
  delete(type: ResourceType, ref: ObjectRef): Promise<boolean>;
}

/** What a process that only reads the cluster needs (the gateway's: reader.ts, without client-node). */
export type KubeReader = Pick<KubeClient, 'get' | 'list' | 'watch'>;

export interface KubeClientOptions {
  /** Field manager of every write (server-side apply ownership; also the User-Agent). */
  fieldManager: string;
  /** Bound on one request that is not a watch. */
  requestTimeoutMs: number;
  /** A watch that receives nothing (no event, no bookmark) for this long is ended and reopened. */
  watchIdleTimeoutMs: number;
  onWrite?: WriteObserver;
}

/** Defaults for pieces without their own settings (the gateway's and management API's clients). */
export const KUBE_REQUEST_TIMEOUT_MS = 30_000;
export const KUBE_WATCH_IDLE_TIMEOUT_MS = 600_000;

const requestTimeout = (ms: number): Middleware => ({
  pre: async (ctx) => {
    ctx.setSignal(AbortSignal.timeout(ms));
    return ctx;
  },
  post: async (rsp) => rsp,
});
const userAgent = (name: string): Middleware => ({
  pre: async (ctx) => {
    ctx.setHeaderParam('User-Agent', name);
    return ctx;
  },
  post: async (rsp) => rsp,
});

/**
 * Server-side applies ask for `fieldValidation=Ignore`. With the default (Warn) the API server drops a
 * field the schema does not declare and says so in a Warning header, which client-node never surfaces,
 * and it parses every apply body a second time, strictly, for duplicate keys (our bodies are JSON we
 * serialized: none). Ignore stores the same object without that second parse (~4% of the API server's
 * CPU while the operator creates 1,000 Apps' objects: docs/benchmarks.md, "Operator convergence
 * (issue 16, third round)").
 */
const applyWithoutDuplicateKeyCheck: Middleware = {
  pre: async (ctx) => {
    if (ctx.getHeaders()['Content-Type'] === PatchStrategy.ServerSideApply)
      ctx.setQueryParam('fieldValidation', 'Ignore');
    return ctx;
  },
  post: async (rsp) => rsp,
};

/** A watch ended by client-node's inactivity timeout (its `done` gets a TimeoutError). */
const isTimeout = (err: unknown) => (err as { name?: unknown } | null)?.name === 'TimeoutError';

export function createKubeClient(kc: KubeConfig, opts: KubeClientOptions): KubeClient {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const api = new WireObjectApi(
    createConfiguration({
      baseServer: new ServerConfiguration(cluster.server, {}),
      authMethods: { default: kc },
      promiseMiddleware: [
        userAgent(opts.fieldManager),
        requestTimeout(opts.requestTimeoutMs),
        applyWithoutDuplicateKeyCheck,
      ],
    }),
  );
  const fm = opts.fieldManager;
  const wrote = (verb: string, type: ResourceType) => opts.onWrite?.(verb, type);
  // client-node's object API is typed with its models (Date times); ours are wire form.
  const wire = <T>(o: unknown) => o as T;
  const typed = (type: ResourceType, obj: ObjectWithMeta) =>
    ({ ...obj, ...api.header(type), metadata: obj.metadata }) as unknown as KubernetesObject;

  return {
    async get(type, ref) {
      try {
        return wire(await api.read(api.header(type, ref) as Parameters<typeof api.read>[0]));
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },

    async list<T extends ObjectWithMeta>(
      type: ResourceType,
      o: { namespace?: string; labelSelector?: string; fieldSelector?: string } = {},
    ) {
      api.header(type);
      return listAllPages(type, async (cont) =>
        wire<ListPage<T>>(
          await api.list(
            type.apiVersion,
            type.kind,
            o.namespace,
            undefined,
            undefined,
            undefined,
            o.fieldSelector,
            o.labelSelector,
            KUBE_LIST_PAGE_SIZE,
            cont,
          ),
        ),
      );
    },

    async watch(type, w) {
      const path = await api.collectionPath(type, w.namespace);
      const watcher = new Watch(kc);
      // client-node 2.0.x keeps its inactivity bound in a private field with no option (src/watch.ts:
      // `private requestTimeoutMs: number = 30000`): the one place we reach inside it.
      // biome-ignore lint/complexity/useLiteralKeys: a private field, reachable only by element access
      watcher['requestTimeoutMs'] = opts.watchIdleTimeoutMs;
      if (w.signal.aborted) return;
      await new Promise<void>((resolve, reject) => {
        let controller: AbortController | undefined;
        let settled = false;
        const finish = (err?: unknown) => {
          if (settled) return;
          settled = true;
          w.signal.removeEventListener('abort', onAbort);
          controller?.abort();
          if (err && !isTimeout(err) && !w.signal.aborted) reject(err);
          else resolve();
        };
        const onAbort = () => finish();
        w.signal.addEventListener('abort', onAbort, { once: true });
        watcher
          .watch(
            path,
            {
              allowWatchBookmarks: true,
              resourceVersion: w.resourceVersion,
              timeoutSeconds: w.timeoutSeconds,
              labelSelector: w.labelSelector,
              fieldSelector: w.fieldSelector,
            },
            (phase, object) => {
              if (settled) return;
              if (phase === 'ERROR') {
                const st = (object ?? {}) as { code?: number; reason?: string; message?: string };
                finish(
                  new KubeApiError(st.code ?? 500, st.reason, `watch ${type.plural}: ${st.message ?? ''}`),
                );
                return;
              }
              // client-node's Watch swallows what a callback throws: end the watch with it instead.
              try {
                w.onEvent({ type: phase, object } as WatchEvent<never>);
              } catch (err) {
                finish(err);
              }
            },
            (err: unknown) => finish(err ?? undefined),
          )
          .then((c) => {
            controller = c;
            if (settled) c.abort();
          }, finish);
      });
    },

    async create(type, obj) {
      wrote('create', type);
      return wire(await api.create(typed(type, obj), undefined, undefined, fm));
    },

    async replace(type, obj) {
      wrote('update', type);
      return wire(await api.replace(typed(type, obj), undefined, undefined, fm));
    },

    async apply(type, obj) {
      wrote('apply', type);
      return wire(
        await api.patch(typed(type, obj), undefined, undefined, fm, true, PatchStrategy.ServerSideApply),
      );
    },

    async mergePatch(type, ref, patch, subresource) {
      wrote(subresource ? `patch-${subresource}` : 'patch', type);
      if (subresource === 'status')
        return wire(await api.patchStatus(type, ref, patch, PatchStrategy.MergePatch, fm));
      const p = (patch ?? {}) as { metadata?: object };
      const header = api.header(type, ref);
      const body = { ...p, ...header, metadata: { ...p.metadata, ...header.metadata } };
      return wire(
        await api.patch(
          body as KubernetesObject,
          undefined,
          undefined,
          fm,
          undefined,
          PatchStrategy.MergePatch,
        ),
      );
    },

    async delete(type, ref) {
      wrote('delete', type);
      try {
        await api.delete(
          api.header(type, ref) as KubernetesObject,
          undefined,
          undefined,
          undefined,
          undefined,
          'Background',
        );
        return true;
      } catch (err) {
        if (isNotFound(err)) return false;
        throw err;
      }
    },
  };
}
