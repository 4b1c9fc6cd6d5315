/**
 * What functions a Cortex app exports, learnt from its runtime's `GET /functions` in the background.
 * `known()` never waits: it answers from the cache (undefined = unknown, so the gateway does not
 * pre-check) and starts a refresh when the entry is missing or stale. A failed lookup is remembered
 * as unknown for the same ttl, so a broken app is not asked on every call.
 */
import type { Dispatcher } from 'undici';
import { Agent } from '../../shared/http/undici-agent.ts';
import type { Logger } from '../../shared/log.ts';

export interface FunctionsCache {
  /** `version` changes when the app changes (e.g. its resourceVersion), which forces a refresh. */
  known(upstream: string, version: string): readonly string[] | undefined;
  /**
   * Calls `fn` with an upstream each time its answer is refreshed (learnt, or asked again after `ttlMs`
   * or a new version), once the cache holds it; until the returned function is called. For the
   * resolver's watchApps.
   */
  watch?(fn: (upstream: string) => void): () => void;
  close(): Promise<void>;
}

export function createFunctionsCache(opts: {
  log: Logger;
  /** Bound on one `GET /functions`. */
  timeoutMs: number;
  /** How long an answer (or a failure) is kept. */
  ttlMs: number;
  /** Entries kept at most (oldest dropped). */
  maxEntries?: number;
  dispatcher?: Dispatcher;
  now?: () => number;
}): FunctionsCache {
  const now = opts.now ?? Date.now;
  const max = opts.maxEntries ?? 10_000;
  const own = opts.dispatcher ? undefined : new Agent({ keepAliveTimeout: 10_000 });
  const dispatcher = opts.dispatcher ?? (own as Dispatcher);
  const cache = new Map<string, { version: string; functions?: readonly string[]; until: number }>();
  const inflight = new Set<string>();
  const watchers = new Set<(upstream: string) => void>();

  const refresh = (upstream: string, version: string) => {
    if (inflight.has(upstream)) return;
    inflight.add(upstream);
    fetchFunctions(dispatcher, upstream, opts.timeoutMs)
      .then(
        (functions) => ({ functions }),
        (err: unknown) => {
          opts.log.debug({ err, upstream }, 'could not list the functions of an app');
          return {};
        },
      )
      .then((r: { functions?: string[] }) => {
        if (cache.size >= max && !cache.has(upstream)) {
          const oldest = cache.keys().next().value;
          if (oldest !== undefined) cache.delete(oldest);
        }
        cache.set(upstream, { version, until: now() + opts.ttlMs, ...r });
        // Every refresh, not only a changed list: for a new version `known` answered undefined meanwhile.
        for (const fn of watchers) fn(upstream);
      })
      .finally(() => inflight.delete(upstream));
  };

  return {
    known(upstream, version) {
      const hit = cache.get(upstream);
      if (!hit || hit.version !== version || hit.until <= now()) {
        refresh(upstream, version);
        return hit?.version === version ? hit.functions : undefined;
      }
      return hit.functions;
    },
    watch(fn) {
      watchers.add(fn);
      return () => void watchers.delete(fn);
    },
    async close() {
      await own?.close();
    },
  };
}

async function fetchFunctions(
  dispatcher: Dispatcher,
  upstream: string,
  timeoutMs: number,
): Promise<string[]> {
  const url = new URL(`${upstream.replace(/\/$/, '')}/functions`);
  const res = await dispatcher.request({
    origin: url.origin,
    path: url.pathname,
    method: 'GET',
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (res.statusCode !== 200) {
    await res.body.dump();
    throw new Error(`GET /functions answered ${res.statusCode}`);
  }
  const body = (await res.body.json()) as { functions?: Array<{ name?: unknown }> };
  if (!Array.isArray(body.functions)) throw new Error('GET /functions: no functions array');
  return body.functions.map((f) => f.name).filter((n): n is string => typeof n === 'string');
}
