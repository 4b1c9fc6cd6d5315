import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../log.ts';
import { waitUntil } from '../testing/wait.ts';
import type { KubeClient, WatchEvent } from './client.ts';
import { KubeApiError } from './errors.ts';
import { createInformer } from './informer.ts';
import type { KubeObject } from './objects.ts';

const type = { apiVersion: 'v1', kind: 'Thing', plural: 'things', namespaced: true };
const obj = (name: string, rv: string): KubeObject => ({
  metadata: { name, namespace: 'n', resourceVersion: rv },
});

/** A client whose list answers and watch behaviours are scripted, one per call. */
/** A long resync and watch, so only the backoff between failed watches decides what these tests see. */
const watchSettings = (baseDelayMs: number, maxDelayMs: number) => ({
  resyncPeriodMs: 60_000,
  watchTimeoutSeconds: 30,
  backoff: { baseDelayMs, maxDelayMs },
});

function scripted(
  lists: KubeObject[][],
  watches: Array<(emit: (ev: WatchEvent) => void, signal: AbortSignal) => Promise<void>>,
) {
  const calls: string[] = [];
  let l = 0;
  let w = 0;
  const client = {
    async list() {
      calls.push('list');
      const items = lists[Math.min(l, lists.length - 1)] ?? [];
      l++;
      return { items, resourceVersion: String(100 + l) };
    },
    async watch(
      _t: unknown,
      o: { resourceVersion: string; signal: AbortSignal; onEvent: (ev: WatchEvent) => void },
    ) {
      calls.push(`watch@${o.resourceVersion}`);
      const step = watches[w++];
      if (!step) return new Promise<void>((resolve) => o.signal.addEventListener('abort', () => resolve()));
      return step(o.onEvent, o.signal);
    },
  } as unknown as KubeClient;
  return { client, calls };
}

describe('informer', () => {
  it('lists, watches, reconnects after errors, relists on 410 and notices deletions', async () => {
    const seen: string[] = [];
    const { client, calls } = scripted(
      [[obj('a', '1'), obj('b', '1')], [obj('a', '1')]],
      [
        async (emit) => {
          emit({ type: 'MODIFIED', object: obj('a', '2') });
          emit({ type: 'BOOKMARK', object: obj('', '7') });
        }, // server closed the watch: reopen from the last version
        async () => {
          throw new Error('connection reset');
        }, // error: back off, relist
        async () => {
          throw new KubeApiError(410, 'Expired', 'too old');
        },
      ],
    );
    const inf = createInformer({
      client,
      type,
      settings: watchSettings(10, 20),
      log: silentLogger(),
      handlers: {
        onAdd: (o) => seen.push(`add ${o.metadata.name}`),
        onUpdate: (o) => seen.push(`update ${o.metadata.name}@${o.metadata.resourceVersion}`),
        onDelete: (o) => seen.push(`delete ${o.metadata.name}`),
      },
    });
    inf.start();
    await inf.waitForSync();
    await waitUntil(() => calls.filter((c) => c === 'list').length >= 3, 10_000);
    await inf.stop();
    expect(calls.slice(0, 4)).toEqual(['list', 'watch@101', 'watch@7', 'list']);
    expect(seen).toEqual(['add a', 'add b', 'update a@2', 'update a@1', 'delete b']);
    expect(inf.get('n', 'a')?.metadata.resourceVersion).toBe('1');
    expect(inf.get('n', 'b')).toBeUndefined();
  });

  it('backs off from a server that ends every watch at once without an event (no tight reopen loop)', async () => {
    let watches = 0;
    const client = {
      list: async () => ({ items: [obj('a', '1')], resourceVersion: '1' }),
      // A proxy or a stopping API server: 200, then the end of the stream.
      watch: async () => {
        watches++;
      },
    } as unknown as KubeClient;
    const inf = createInformer({
      client,
      type,
      settings: watchSettings(200, 200),
      log: silentLogger(),
      handlers: {},
    });
    inf.start();
    await inf.waitForSync();
    await new Promise((r) => setTimeout(r, 500));
    await inf.stop();
    // One watch per backoff (200 ms), not thousands per second; the cache is kept (no event was missed).
    expect(watches).toBeGreaterThanOrEqual(1);
    expect(watches).toBeLessThanOrEqual(4);
    expect(inf.get('n', 'a')).toBeDefined();
  });

  it('leaves no listener behind on its stop signal for each backoff it waited out', async () => {
    let watches = 0;
    let signal: AbortSignal | undefined;
    const client = {
      list: async () => ({ items: [], resourceVersion: '1' }),
      watch: async (_t: unknown, o: { signal: AbortSignal }) => {
        signal = o.signal;
        watches++;
        throw new Error('connection refused');
      },
    } as unknown as KubeClient;
    const inf = createInformer({
      client,
      type,
      settings: watchSettings(1, 1),
      log: silentLogger(),
      handlers: {},
    });
    inf.start();
    await waitUntil(() => watches >= 30, 10_000);
    const listeners = getEventListeners(signal as AbortSignal, 'abort').length;
    await inf.stop();
    expect(listeners).toBeLessThanOrEqual(2);
  });

  it('hands every cached object to onResync periodically', async () => {
    const resynced: string[] = [];
    const { client } = scripted([[obj('a', '1')]], []);
    const inf = createInformer({
      client,
      type,
      settings: { resyncPeriodMs: 30, watchTimeoutSeconds: 30, backoff: { baseDelayMs: 10, maxDelayMs: 20 } },
      log: silentLogger(),
      handlers: { onResync: (o) => resynced.push(o.metadata.name) },
    });
    inf.start();
    await waitUntil(() => resynced.length >= 2, 10_000);
    await inf.stop();
    expect(new Set(resynced)).toEqual(new Set(['a']));
  });

  it('caches transformed objects and keeps an index in step with adds, moves and deletes', async () => {
    const labelled = (name: string, rv: string, app: string): KubeObject => ({
      metadata: { name, namespace: 'n', resourceVersion: rv, labels: { app } },
      spec: { large: 'x'.repeat(100) },
    });
    let release: () => void = () => {};
    const { client } = scripted(
      [[labelled('p1', '1', 'x'), labelled('p2', '1', 'x'), labelled('p3', '1', 'y')]],
      [
        async (emit, signal) => {
          emit({ type: 'MODIFIED', object: labelled('p2', '2', 'y') });
          emit({ type: 'DELETED', object: labelled('p3', '3', 'y') });
          await new Promise<void>((r) => {
            release = r;
            signal.addEventListener('abort', () => r());
          });
        },
      ],
    );
    const seen: unknown[] = [];
    const inf = createInformer<KubeObject>({
      client,
      type,
      settings: watchSettings(10, 20),
      log: silentLogger(),
      handlers: { onUpdate: (o) => seen.push(o.metadata) },
      transform: (o) => ({ metadata: { name: o.metadata.name, namespace: 'n', labels: o.metadata.labels } }),
      indexBy: (o) => o.metadata.labels?.app,
    });
    inf.start();
    await inf.waitForSync();
    await waitUntil(() => inf.get('n', 'p3') === undefined, 10_000);
    const names = (v: string) =>
      inf
        .byIndex(v)
        .map((o) => o.metadata.name)
        .sort();
    expect(names('x')).toEqual(['p1']);
    expect(names('y')).toEqual(['p2']);
    expect(names('z')).toEqual([]);
    // Handlers and the cache see the transformed object only.
    expect(seen).toEqual([{ name: 'p2', namespace: 'n', labels: { app: 'y' } }]);
    expect(inf.get('n', 'p1')).not.toHaveProperty('spec');
    release();
    await inf.stop();
  });
});
