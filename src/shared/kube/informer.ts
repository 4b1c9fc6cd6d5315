/**
 * List-then-watch cache of one resource type (cluster-wide unless a namespace is given), on a KubeClient.
 * The operator's controllers and the gateway's resolver and key-set watch use it (client-node's informer has no transform,
 * index, resync or sync wait). The watch restarts from the last seen resourceVersion (after the server
 * ends it or it was idle), relists when that version is gone (410), backs off
 * exponentially on errors — a watch that ends within WATCH_MIN_MS having received nothing counts as one —
 * and every `resyncPeriodMs` hands every cached object to `onResync` so a missed event can never leave an
 * object unreconciled for long.
 */
import { type BackoffSettings, backoffDelay } from '../backoff.ts';
import type { Logger } from '../log.ts';
import type { KubeReader } from './client.ts';
import { isGone } from './errors.ts';
import type { ObjectWithMeta, ResourceType } from './objects.ts';

/**
 * A watch that ends sooner than this without an event or bookmark is a failure (backoff, relist), as
 * client-go's "very short watch": a proxy or a stopping API server that ends every watch at once would
 * otherwise be asked again in a tight loop (thousands of watches a second).
 */
export const WATCH_MIN_MS = 1_000;

export interface InformerSettings {
  resyncPeriodMs: number;
  /** Server-side bound on one watch request; the watch is then reopened from the last version. */
  watchTimeoutSeconds: number;
  backoff: BackoffSettings;
}

export interface InformerHandlers<T extends ObjectWithMeta> {
  onAdd?(obj: T): void;
  onUpdate?(obj: T, old: T): void;
  onDelete?(obj: T): void;
  onResync?(obj: T): void;
}

export interface Informer<T extends ObjectWithMeta> {
  get(namespace: string | undefined, name: string): T | undefined;
  list(): T[];
  /** Cached objects whose `indexBy` value is `value` (none without an `indexBy`). */
  byIndex(value: string): T[];
  /** True once the first list has filled the cache. */
  synced(): boolean;
  /** Resolves once synced (or on stop). */
  waitForSync(): Promise<void>;
  start(): void;
  stop(): Promise<void>;
}

export const objectKey = (o: { metadata: { namespace?: string; name: string } }): string =>
  o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name;

/** The inverse of objectKey (a cluster-scoped key has the namespace ''). */
export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return i < 0 ? { namespace: '', name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

/** Read access to a cache (an Informer is one), what a reconciler needs. */
export interface Lister<T> {
  get(namespace: string | undefined, name: string): T | undefined;
}

export function createInformer<T extends ObjectWithMeta>(opts: {
  client: KubeReader;
  type: ResourceType;
  /** Watch one namespace only; all namespaces when absent. */
  namespace?: string | undefined;
  labelSelector?: string;
  fieldSelector?: string;
  settings: InformerSettings;
  handlers: InformerHandlers<T>;
  log: Logger;
  /** Applied to every object before it is cached and handed on: keep only what readers use. */
  transform?: (obj: T) => T;
  /** One secondary index: objects by this value (e.g. the App a pod belongs to). */
  indexBy?: (obj: T) => string | undefined;
}): Informer<T> {
  const { client, type, settings, handlers } = opts;
  const transform = opts.transform ?? ((o: T) => o);
  const log = opts.log.child({ informer: type.plural, namespace: opts.namespace ?? '*' });
  const store = new Map<string, T>();
  const index = new Map<string, Set<string>>();
  const unindex = (key: string, obj: T) => {
    const v = opts.indexBy?.(obj);
    if (v === undefined) return;
    const keys = index.get(v);
    keys?.delete(key);
    if (keys?.size === 0) index.delete(v);
  };
  /** The object store and its index, changed together. */
  const cache = {
    get: (key: string) => store.get(key),
    set(key: string, obj: T) {
      const old = store.get(key);
      if (old) unindex(key, old);
      store.set(key, obj);
      const v = opts.indexBy?.(obj);
      if (v !== undefined) index.set(v, (index.get(v) ?? new Set()).add(key));
    },
    delete(key: string) {
      const old = store.get(key);
      if (old) unindex(key, old);
      store.delete(key);
    },
    entries: () => store.entries(),
    values: () => store.values(),
  };
  const abort = new AbortController();
  let isSynced = false;
  let resolveSynced: () => void = () => {};
  const syncedPromise = new Promise<void>((r) => {
    resolveSynced = r;
  });
  let loop: Promise<void> | undefined;
  let resyncTimer: NodeJS.Timeout | undefined;
  const selector = {
    ...(opts.labelSelector ? { labelSelector: opts.labelSelector } : {}),
    ...(opts.fieldSelector ? { fieldSelector: opts.fieldSelector } : {}),
    ...(opts.namespace ? { namespace: opts.namespace } : {}),
  };

  // Its abort listener goes when it wakes either way: one per backoff would pile up on the informer's signal.
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(t);
        abort.signal.removeEventListener('abort', wake);
        resolve();
      };
      const t = setTimeout(wake, ms);
      abort.signal.addEventListener('abort', wake, { once: true });
    });

  const relist = async (): Promise<string> => {
    const { items, resourceVersion } = await client.list<T>(type, selector);
    const seen = new Set<string>();
    for (const item of items) {
      const obj = transform(item);
      const key = objectKey(obj);
      seen.add(key);
      const old = cache.get(key);
      cache.set(key, obj);
      if (!old) handlers.onAdd?.(obj);
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) handlers.onUpdate?.(obj, old);
    }
    for (const [key, old] of [...cache.entries()]) {
      if (!seen.has(key)) {
        cache.delete(key);
        handlers.onDelete?.(old);
      }
    }
    if (!isSynced) {
      isSynced = true;
      resolveSynced();
    }
    return resourceVersion;
  };

  const run = async () => {
    let failures = 0;
    let rv: string | undefined;
    while (!abort.signal.aborted) {
      try {
        if (rv === undefined) rv = await relist();
        const from: string = rv;
        const opened = Date.now();
        let received = 0;
        await client.watch<T>(type, {
          ...selector,
          resourceVersion: from,
          timeoutSeconds: settings.watchTimeoutSeconds,
          signal: abort.signal,
          onEvent: (ev) => {
            received++;
            const obj = transform({ ...ev.object, apiVersion: type.apiVersion, kind: type.kind } as T);
            rv = obj.metadata.resourceVersion ?? rv;
            if (ev.type === 'BOOKMARK') return;
            const key = objectKey(obj);
            const old = cache.get(key);
            if (ev.type === 'DELETED') {
              cache.delete(key);
              handlers.onDelete?.(obj);
            } else {
              cache.set(key, obj);
              if (old) handlers.onUpdate?.(obj, old);
              else handlers.onAdd?.(obj);
            }
          },
        });
        if (received === 0 && !abort.signal.aborted && Date.now() - opened < WATCH_MIN_MS)
          throw new Error(`the watch ended within ${WATCH_MIN_MS} ms without an event`);
        failures = 0;
      } catch (err) {
        if (abort.signal.aborted) break;
        if (isGone(err)) {
          log.debug('watch version expired: relisting');
          rv = undefined;
          continue;
        }
        failures++;
        const delay = backoffDelay(failures, settings.backoff);
        log.warn({ err: String(err), failures, delayMs: delay }, 'watch failed: retrying');
        // After a failure the cache may have missed events; relist on reconnect.
        rv = undefined;
        await sleep(delay);
      }
    }
  };

  return {
    get: (namespace, name) => cache.get(namespace ? `${namespace}/${name}` : name),
    list: () => [...cache.values()],
    byIndex: (value) => [...(index.get(value) ?? [])].flatMap((k) => store.get(k) ?? []),
    synced: () => isSynced,
    waitForSync: () =>
      Promise.race([
        syncedPromise,
        new Promise<void>((r) => abort.signal.addEventListener('abort', () => r())),
      ]),
    start() {
      if (loop) return;
      loop = run();
      resyncTimer = setInterval(() => {
        if (!isSynced) return;
        for (const obj of cache.values()) handlers.onResync?.(obj);
      }, settings.resyncPeriodMs);
      resyncTimer.unref();
    },
    async stop() {
      abort.abort();
      clearInterval(resyncTimer);
      await loop;
    },
  };
}
