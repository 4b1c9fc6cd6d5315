/**
 * A read-only Kubernetes client — get, list (all pages) and watch (bookmarks included) of any kind in
 * `Resources` — straight on undici, for processes that only read the cluster (the gateway). The same
 * `KubeReader` contract as the platform's KubeClient (client.ts, on @kubernetes/client-node), without
 * loading client-node: its generated API models are ~60 MiB of a process's memory (docs/benchmarks.md).
 *
 * Bounds: a get or list page is bounded by `requestTimeoutMs`; a watch by the server (`timeoutSeconds`)
 * and by `watchIdleTimeoutMs` without a byte (headers, event or bookmark), after which it resolves as
 * ended; one event's line by `KUBE_WATCH_EVENT_MAX_CHARS`. Errors: an error answer is a `KubeApiError` (HTTP status + the Status reason; errors.ts
 * classifies it), a watch's ERROR event too; a network failure is undici's error.
 * One undici Agent is reused (kept-alive connections) and replaced every `agentRenewMs` with one built from
 * freshly read TLS material, so rotated client certificates and CAs are picked up (material that cannot be
 * read at that moment keeps the Agent in use until a later request can read it).
 */
import { STATUS_CODES } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import type { Dispatcher } from 'undici';
import { Agent } from '../http/undici-agent.ts';
import type { KubeAccess } from './access.ts';
import type { KubeReader, ListResult, WatchEvent } from './client.ts';
// The same renewal as client-node's pooled Agent (connection.ts has no runtime imports).
import { KUBE_AGENT_RENEW_MS } from './connection.ts';
import { isNotFound, KubeApiError } from './errors.ts';
import { KUBE_LIST_PAGE_SIZE, type ListPage, listAllPages } from './list-pages.ts';
import type { ObjectRef, ObjectWithMeta, ResourceType } from './objects.ts';

/**
 * Longest watch event read, in characters of its JSON line (an object is at most ~1.5 MiB in etcd): a
 * stream that goes on without a newline (a broken proxy) ends the watch with an error instead of
 * growing the buffer until the server's timeout.
 */
export const KUBE_WATCH_EVENT_MAX_CHARS = 16 * 1024 * 1024;

export interface KubeReaderOptions {
  /** Shown as the User-Agent in the API server's logs. */
  userAgent: string;
  /** Bound on one request that is not a watch (each list page). */
  requestTimeoutMs: number;
  /** A watch that receives nothing (no event, no bookmark) for this long is ended (it resolves). */
  watchIdleTimeoutMs: number;
  /** How long one Agent is reused before one with freshly read TLS material replaces it (KUBE_AGENT_RENEW_MS). */
  agentRenewMs?: number;
  /** Items per list page (default KUBE_LIST_PAGE_SIZE). */
  pageSize?: number;
  /** Longest watch event line (default KUBE_WATCH_EVENT_MAX_CHARS). */
  watchEventMaxChars?: number;
  now?: () => number;
}

export interface ClosableKubeReader extends KubeReader {
  /** Closes the connections (after the requests in flight). */
  close(): Promise<void>;
}

/** The URL path of a kind's collection, in a namespace or across all. */
export function collectionPath(type: ResourceType, namespace?: string): string {
  const group = type.apiVersion.includes('/') ? `/apis/${type.apiVersion}` : `/api/${type.apiVersion}`;
  return type.namespaced && namespace
    ? `${group}/namespaces/${encodeURIComponent(namespace)}/${type.plural}`
    : `${group}/${type.plural}`;
}

const isIdle = (err: unknown) => {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT';
};

/** The error answer as a KubeApiError carrying the Status' reason and message. */
async function apiError(res: Dispatcher.ResponseData, what: string): Promise<KubeApiError> {
  const text = await res.body.text().catch(() => '');
  let status: { reason?: unknown; message?: unknown } = {};
  try {
    status = JSON.parse(text) as typeof status;
  } catch {
    // Not a Status (a proxy's page): the HTTP status says enough.
  }
  const message = typeof status.message === 'string' ? status.message : STATUS_CODES[res.statusCode];
  const reason = typeof status.reason === 'string' ? status.reason : undefined;
  return new KubeApiError(res.statusCode, reason, `${what}: ${res.statusCode} ${message ?? ''}`.trim());
}

export function createKubeReader(access: KubeAccess, opts: KubeReaderOptions): ClosableKubeReader {
  const url = new URL(access.server);
  const origin = url.origin;
  const prefix = url.pathname.replace(/\/$/, '');
  const now = opts.now ?? Date.now;
  const renewMs = opts.agentRenewMs ?? KUBE_AGENT_RENEW_MS;
  const newAgent = () => {
    const tls = url.protocol === 'https:' ? access.tls() : undefined;
    return new Agent(tls ? { connect: tls } : {});
  };
  let agent = { dispatcher: newAgent(), since: now() };
  const dispatcher = () => {
    if (now() - agent.since > renewMs) {
      let fresh: InstanceType<typeof Agent> | undefined;
      try {
        fresh = newAgent();
      } catch {
        // A TLS file unreadable right now (mid-rotation): the Agent in use still works; the next request
        // tries again.
      }
      if (fresh) {
        // The old Agent finishes what is in flight (a watch: until it ends), then closes its connections.
        const old = agent.dispatcher;
        agent = { dispatcher: fresh, since: now() };
        void old.close().catch(() => undefined);
      }
    }
    return agent.dispatcher;
  };
  const headers = () => ({ ...access.headers(), accept: 'application/json', 'user-agent': opts.userAgent });

  /** One GET bounded by requestTimeoutMs, answering the parsed JSON; an error answer throws a KubeApiError. */
  async function getJson<T>(path: string, what: string): Promise<T> {
    const signal = AbortSignal.timeout(opts.requestTimeoutMs);
    try {
      const res = await dispatcher().request({
        origin,
        path: prefix + path,
        method: 'GET',
        headers: headers(),
        signal,
      });
      if (res.statusCode < 200 || res.statusCode > 299) throw await apiError(res, what);
      return JSON.parse(await res.body.text()) as T;
    } catch (err) {
      if (signal.aborted && !(err instanceof KubeApiError))
        throw new Error(`${what}: no answer within ${opts.requestTimeoutMs} ms`, { cause: err });
      throw err;
    }
  }

  return {
    async get<T extends ObjectWithMeta>(type: ResourceType, ref: ObjectRef): Promise<T | undefined> {
      const path = `${collectionPath(type, ref.namespace)}/${encodeURIComponent(ref.name)}`;
      try {
        return await getJson<T>(
          path,
          `get ${type.plural} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name}`,
        );
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },

    async list<T extends ObjectWithMeta>(
      type: ResourceType,
      o: { namespace?: string; labelSelector?: string; fieldSelector?: string } = {},
    ): Promise<ListResult<T>> {
      return listAllPages(type, (cont) => {
        const q = new URLSearchParams({ limit: String(opts.pageSize ?? KUBE_LIST_PAGE_SIZE) });
        if (o.labelSelector) q.set('labelSelector', o.labelSelector);
        if (o.fieldSelector) q.set('fieldSelector', o.fieldSelector);
        if (cont) q.set('continue', cont);
        return getJson<ListPage<T>>(`${collectionPath(type, o.namespace)}?${q}`, `list ${type.plural}`);
      });
    },

    async watch(type, w) {
      if (w.signal.aborted) return;
      const what = `watch ${type.plural}`;
      const q = new URLSearchParams({
        watch: 'true',
        allowWatchBookmarks: 'true',
        resourceVersion: w.resourceVersion,
        timeoutSeconds: String(w.timeoutSeconds),
      });
      if (w.labelSelector) q.set('labelSelector', w.labelSelector);
      if (w.fieldSelector) q.set('fieldSelector', w.fieldSelector);
      let res: Dispatcher.ResponseData;
      try {
        res = await dispatcher().request({
          origin,
          path: `${prefix}${collectionPath(type, w.namespace)}?${q}`,
          method: 'GET',
          headers: headers(),
          signal: w.signal,
          // Silence before the headers or between two chunks: the connection may be dead without closing.
          headersTimeout: opts.watchIdleTimeoutMs,
          bodyTimeout: opts.watchIdleTimeoutMs,
        });
      } catch (err) {
        if (w.signal.aborted || isIdle(err)) return;
        throw err;
      }
      if (res.statusCode !== 200) throw await apiError(res, what);
      const body = res.body;
      const maxEvent = opts.watchEventMaxChars ?? KUBE_WATCH_EVENT_MAX_CHARS;
      await new Promise<void>((resolve, reject) => {
        let settled = false;
        const finish = (err?: unknown) => {
          if (settled) return;
          settled = true;
          w.signal.removeEventListener('abort', onAbort);
          if (!body.destroyed) body.destroy();
          if (err && !isIdle(err) && !w.signal.aborted) reject(err);
          else resolve();
        };
        const onAbort = () => finish();
        w.signal.addEventListener('abort', onAbort, { once: true });
        const decoder = new StringDecoder('utf8');
        let pending = '';
        const line = (text: string) => {
          let ev: { type?: WatchEvent['type']; object?: unknown };
          try {
            ev = JSON.parse(text) as typeof ev;
          } catch {
            // A torn stream: end the watch with an error so the cache relists rather than miss an event.
            finish(new Error(`${what}: unreadable event`));
            return;
          }
          if (ev.type === 'ERROR') {
            const st = (ev.object ?? {}) as { code?: number; reason?: string; message?: string };
            finish(new KubeApiError(st.code ?? 500, st.reason, `${what}: ${st.message ?? ''}`));
            return;
          }
          try {
            w.onEvent(ev as WatchEvent<never>);
          } catch (err) {
            finish(err);
          }
        };
        body.on('data', (chunk: Buffer) => {
          pending += decoder.write(chunk);
          let nl = pending.indexOf('\n');
          while (nl >= 0 && !settled) {
            const text = pending.slice(0, nl);
            pending = pending.slice(nl + 1);
            if (text.trim() !== '') line(text);
            nl = pending.indexOf('\n');
          }
          if (!settled && pending.length > maxEvent)
            finish(new Error(`${what}: an event longer than ${maxEvent} characters`));
        });
        body.on('end', () => {
          const rest = (pending + decoder.end()).trim();
          if (rest !== '' && !settled) line(rest);
          finish();
        });
        body.on('error', finish);
        body.on('close', () => finish());
      });
    },

    close: () => agent.dispatcher.close(),
  };
}
