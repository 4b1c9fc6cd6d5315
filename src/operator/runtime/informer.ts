/**
 * List-then-watch cache of one resource type (cluster-wide unless a namespace is given). The watch
 * restarts from the last seen resourceVersion, relists when that version is gone (410), backs off
 * exponentially on errors, and every `resyncPeriodMs` hands every cached object to `onResync` so a
 * missed event can never leave an object unreconciled for long.
 */
import type { Logger } from '../../shared/log.ts';
import { isGone, type KubeClient, type ObjectWithMeta, type ResourceType } from './kube-client.ts';
import { type BackoffSettings, backoffDelay } from './workqueue.ts';

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
  /** True once the first list has filled the cache. */
  synced(): boolean;
  /** Resolves once synced (or on stop). */
  waitForSync(): Promise<void>;
  start(): void;
  stop(): Promise<void>;
}

export const objectKey = (o: { metadata: { namespace?: string; name: string } }): string =>
  o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name;

export function createInformer<T extends ObjectWithMeta>(opts: {
  client: KubeClient;
  type: ResourceType;
  /** Watch one namespace only; all namespaces when absent. */
  namespace?: string | undefined;
  labelSelector?: string;
  settings: InformerSettings;
  handlers: InformerHandlers<T>;
  log: Logger;
}): Informer<T> {
  const { client, type, settings, handlers } = opts;
  const log = opts.log.child({ informer: type.plural, namespace: opts.namespace ?? '*' });
  const cache = new Map<string, T>();
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
    ...(opts.namespace ? { namespace: opts.namespace } : {}),
  };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      abort.signal.addEventListener(
        'abort',
        () => {
          clearTimeout(t);
          resolve();
        },
        { once: true },
      );
    });

  const relist = async (): Promise<string> => {
    const { items, resourceVersion } = await client.list<T>(type, selector);
    const seen = new Set<string>();
    for (const obj of items) {
      const key = objectKey(obj);
      seen.add(key);
      const old = cache.get(key);
      cache.set(key, obj);
      if (!old) handlers.onAdd?.(obj);
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) handlers.onUpdate?.(obj, old);
    }
    for (const [key, old] of cache) {
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
        await client.watch<T>(type, {
          ...selector,
          resourceVersion: from,
          timeoutSeconds: settings.watchTimeoutSeconds,
          signal: abort.signal,
          onEvent: (ev) => {
            const obj = { ...ev.object, apiVersion: type.apiVersion, kind: type.kind } as T;
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
