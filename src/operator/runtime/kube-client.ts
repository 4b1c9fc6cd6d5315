/**
 * A small REST client for the handful of resources the operator touches: typed enough for our use,
 * with server-side apply, status patches, list and watch. Authentication and TLS come from the
 * KubeConfig (the same mechanism @kubernetes/client-node's own Watch uses).
 */
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import {
  HttpMethod,
  type KubeConfig,
  RequestContext,
  type V1DeploymentSpec,
  type V1DeploymentStatus,
  type V1IngressSpec,
  type V1PodSpec,
  type V1PodStatus,
  type V1ServiceSpec,
} from '@kubernetes/client-node';
import { fetch } from 'undici';
import {
  API_VERSION,
  APP_PLURAL,
  DOMAIN_ASSIGNMENT_PLURAL,
  type ObjectMeta,
} from '../../apis/v1alpha1/types.ts';
import { isConflict, isGone, isNotFound, KubeApiError } from '../../shared/kube/errors.ts';

/** The field manager every server-side apply of ours uses. */
export const FIELD_MANAGER = 'apphost-operator';

/** Any object with Kubernetes metadata (our App/DomainAssignment types, or a KubeObject). */
export interface ObjectWithMeta {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMetadata;
}

export interface KubeObject extends ObjectWithMeta {
  /** spec, status and the rest differ per kind: see the typed kinds below. */
  [field: string]: unknown;
}

/** The API's ObjectMeta plus what generic machinery needs on any kind (owner references). */
export interface ObjectMetadata extends ObjectMeta {
  ownerReferences?: OwnerReference[];
}

/** The kinds we build and read, typed with @kubernetes/client-node's models (wire-compatible for these). */
export interface Deployment extends KubeObject {
  spec: V1DeploymentSpec;
  status?: V1DeploymentStatus;
}
export interface Service extends KubeObject {
  spec: V1ServiceSpec;
}
export interface Ingress extends KubeObject {
  spec: V1IngressSpec;
}
/** Pods are only read (their status says why an App is not ready). */
export interface Pod extends KubeObject {
  spec?: V1PodSpec;
  status?: V1PodStatus;
}
/** Lease times are MicroTime strings on the wire (client-node's model types them as Date). */
export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}
export interface Lease extends KubeObject {
  spec?: LeaseSpec;
}
/** The fields of a core/v1 Event the operator writes and tests read. */
export interface KubeEvent extends KubeObject {
  involvedObject?: { apiVersion?: string; kind?: string; name?: string; namespace?: string; uid?: string };
  type?: string;
  reason?: string;
  message?: string;
  source?: { component?: string };
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** A kind the operator knows how to address. */
export interface ResourceType {
  apiVersion: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

export const Resources = {
  App: { apiVersion: API_VERSION, kind: 'App', plural: APP_PLURAL, namespaced: true },
  DomainAssignment: {
    apiVersion: API_VERSION,
    kind: 'DomainAssignment',
    plural: DOMAIN_ASSIGNMENT_PLURAL,
    namespaced: true,
  },
  Deployment: { apiVersion: 'apps/v1', kind: 'Deployment', plural: 'deployments', namespaced: true },
  Service: { apiVersion: 'v1', kind: 'Service', plural: 'services', namespaced: true },
  Pod: { apiVersion: 'v1', kind: 'Pod', plural: 'pods', namespaced: true },
  Ingress: { apiVersion: 'networking.k8s.io/v1', kind: 'Ingress', plural: 'ingresses', namespaced: true },
  Lease: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', plural: 'leases', namespaced: true },
  Event: { apiVersion: 'v1', kind: 'Event', plural: 'events', namespaced: true },
  Namespace: { apiVersion: 'v1', kind: 'Namespace', plural: 'namespaces', namespaced: false },
} as const satisfies Record<string, ResourceType>;

export interface ObjectRef {
  namespace?: string | undefined;
  name: string;
}

// The one Kubernetes error taxonomy (src/shared/kube/errors.ts), re-exported for the operator's modules.
export { isConflict, isGone, isNotFound, KubeApiError };

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
  get<T extends ObjectWithMeta>(type: ResourceType, ref: ObjectRef): Promise<T | undefined>;
  list<T extends ObjectWithMeta>(
    type: ResourceType,
    opts?: { namespace?: string; labelSelector?: string },
  ): Promise<ListResult<T>>;
  /** Streams watch events until the server ends the watch, `signal` aborts, or the idle bound passes. */
  watch<T extends ObjectWithMeta>(
    type: ResourceType,
    opts: {
      resourceVersion: string;
      namespace?: string;
      labelSelector?: string;
      timeoutSeconds: number;
      signal: AbortSignal;
      onEvent: (ev: WatchEvent<T>) => void;
    },
  ): Promise<void>;
  create<T extends ObjectWithMeta>(type: ResourceType, obj: T): Promise<T>;
  replace<T extends ObjectWithMeta>(type: ResourceType, obj: T): Promise<T>;
  /** Server-side apply under FIELD_MANAGER with force (we are the only owner of what we set). */
  apply<T extends ObjectWithMeta>(type: ResourceType, obj: T): Promise<T>;
  /** JSON merge patch of the object or of its `status` subresource. */
  mergePatch<T extends ObjectWithMeta>(
    type: ResourceType,
    ref: ObjectRef,
    patch: unknown,
    subresource?: 'status',
  ): Promise<T>;
  /** Deletes; an already-missing object is not an error (answers false). */
  delete(type: ResourceType, ref: ObjectRef): Promise<boolean>;
}

export function resourcePath(type: ResourceType, ref?: Partial<ObjectRef>): string {
  const base = type.apiVersion.includes('/') ? `/apis/${type.apiVersion}` : `/api/${type.apiVersion}`;
  const ns = type.namespaced && ref?.namespace ? `/namespaces/${encodeURIComponent(ref.namespace)}` : '';
  const name = ref?.name ? `/${encodeURIComponent(ref.name)}` : '';
  return `${base}${ns}/${type.plural}${name}`;
}

export interface HttpKubeClientOptions {
  /** Bound on one non-watch request. */
  requestTimeoutMs: number;
  /** A watch that sends nothing (not even a bookmark) for this long is dropped and restarted. */
  watchIdleTimeoutMs: number;
  onWrite?: WriteObserver;
}

export function createHttpKubeClient(kc: KubeConfig, opts: HttpKubeClientOptions): KubeClient {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const server = cluster.server.replace(/\/$/, '');

  async function send(
    method: HttpMethod,
    path: string,
    init: {
      query?: Record<string, string>;
      body?: unknown;
      contentType?: string;
      signal?: AbortSignal;
      stream?: boolean;
    } = {},
  ) {
    const url = new URL(server + path);
    for (const [k, v] of Object.entries(init.query ?? {})) url.searchParams.set(k, v);
    const ctx = new RequestContext(url.toString(), method);
    await kc.applySecurityAuthentication(ctx);
    const headers: Record<string, string> = { ...ctx.getHeaders(), accept: 'application/json' };
    let body: string | undefined;
    if (init.body !== undefined) {
      headers['content-type'] = init.contentType ?? 'application/json';
      body = JSON.stringify(init.body);
    }
    const signal = init.stream
      ? init.signal
      : AbortSignal.any([AbortSignal.timeout(opts.requestTimeoutMs), ...(init.signal ? [init.signal] : [])]);
    const res = await fetch(url, {
      method,
      headers,
      body,
      dispatcher: ctx.getDispatcher(),
      ...(signal ? { signal } : {}),
    });
    if (res.status >= 400) {
      const text = await res.text();
      let reason: string | undefined;
      let message = text;
      try {
        const status = JSON.parse(text) as { reason?: string; message?: string };
        reason = status.reason;
        message = status.message ?? text;
      } catch {
        // not a Status object: keep the raw text
      }
      throw new KubeApiError(res.status, reason, `${method} ${path}: ${res.status} ${message}`);
    }
    return res;
  }

  async function json<T>(method: HttpMethod, path: string, init: Parameters<typeof send>[2] = {}) {
    const res = await send(method, path, init);
    return (await res.json()) as T;
  }

  const wrote = (verb: string, type: ResourceType) => opts.onWrite?.(verb, type);

  return {
    async get(type, ref) {
      try {
        return await json(HttpMethod.GET, resourcePath(type, ref));
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },

    async list<T extends ObjectWithMeta>(
      type: ResourceType,
      o: { namespace?: string; labelSelector?: string } = {},
    ) {
      const items: T[] = [];
      let resourceVersion = '';
      let cont: string | undefined;
      do {
        const query: Record<string, string> = { limit: '500' };
        if (o.labelSelector) query.labelSelector = o.labelSelector;
        if (cont) query.continue = cont;
        const page = await json<{ items: T[]; metadata: { resourceVersion: string; continue?: string } }>(
          HttpMethod.GET,
          resourcePath(type, o.namespace ? { namespace: o.namespace } : undefined),
          { query },
        );
        // List items carry no apiVersion/kind; fill them in so cached objects are complete.
        for (const it of page.items) items.push({ ...it, apiVersion: type.apiVersion, kind: type.kind });
        resourceVersion = page.metadata.resourceVersion;
        cont = page.metadata.continue || undefined;
      } while (cont);
      return { items, resourceVersion };
    },

    async watch(type, w) {
      const query: Record<string, string> = {
        watch: 'true',
        allowWatchBookmarks: 'true',
        resourceVersion: w.resourceVersion,
        timeoutSeconds: String(w.timeoutSeconds),
      };
      if (w.labelSelector) query.labelSelector = w.labelSelector;
      const idle = new AbortController();
      const signal = AbortSignal.any([w.signal, idle.signal]);
      let timer: NodeJS.Timeout | undefined;
      const touch = () => {
        clearTimeout(timer);
        timer = setTimeout(() => idle.abort(new Error('watch idle timeout')), opts.watchIdleTimeoutMs);
        timer.unref();
      };
      touch();
      try {
        const path = resourcePath(type, w.namespace ? { namespace: w.namespace } : undefined);
        const res = await send(HttpMethod.GET, path, { query, signal, stream: true });
        if (!res.body) return;
        const lines = createInterface({ input: Readable.fromWeb(res.body as never), crlfDelay: Infinity });
        for await (const line of lines) {
          touch();
          if (!line.trim()) continue;
          const ev = JSON.parse(line) as WatchEvent;
          if (ev.type === 'ERROR') {
            const st = ev.object as unknown as { code?: number; reason?: string; message?: string };
            throw new KubeApiError(st.code ?? 500, st.reason, `watch ${type.plural}: ${st.message ?? ''}`);
          }
          w.onEvent(ev as never);
        }
      } catch (err) {
        if (w.signal.aborted) return;
        throw err;
      } finally {
        clearTimeout(timer);
      }
    },

    async create(type, obj) {
      wrote('create', type);
      return json(HttpMethod.POST, resourcePath(type, { namespace: obj.metadata.namespace }), { body: obj });
    },

    async replace(type, obj) {
      wrote('update', type);
      return json(HttpMethod.PUT, resourcePath(type, obj.metadata), { body: obj });
    },

    async apply(type, obj) {
      wrote('apply', type);
      return json(HttpMethod.PATCH, resourcePath(type, obj.metadata), {
        body: { ...obj, apiVersion: type.apiVersion, kind: type.kind },
        contentType: 'application/apply-patch+yaml',
        query: { fieldManager: FIELD_MANAGER, force: 'true' },
      });
    },

    async mergePatch(type, ref, patch, subresource) {
      wrote(subresource ? `patch-${subresource}` : 'patch', type);
      const path = resourcePath(type, ref) + (subresource ? `/${subresource}` : '');
      return json(HttpMethod.PATCH, path, {
        body: patch,
        contentType: 'application/merge-patch+json',
        query: { fieldManager: FIELD_MANAGER },
      });
    },

    async delete(type, ref) {
      wrote('delete', type);
      try {
        await json(HttpMethod.DELETE, resourcePath(type, ref), {
          body: { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Background' },
        });
        return true;
      } catch (err) {
        if (isNotFound(err)) return false;
        throw err;
      }
    },
  };
}
