/**
 * client-node's generic object client (`KubernetesObjectApi`: create, read, list, replace, patch incl.
 * server-side apply, delete of any kind, on client-node's request pipeline — auth, middleware, undici,
 * `ApiException` errors), with the three gaps of client-node 2.0.x that the platform cannot live with
 * closed in this one subclass (docs/architecture.md, "Kubernetes"):
 *
 * 1. Answers stay in wire form. `processResponse` deserializes built-in kinds into model classes whose
 *    times are `Date`s (object.ts `processResponse` → `ObjectSerializer.deserialize`), while watch events
 *    arrive as plain JSON with RFC 3339 strings; a cache would mix both, and a Lease read back and written
 *    again is refused (a `Date` serializes with 3 fractional digits, MicroTime needs 6:
 *    kubernetes-client/javascript#828). Here every answer is the JSON the server sent.
 * 2. No API discovery. `resource()` asks the API server which kinds an apiVersion has (cached per
 *    apiVersion, but one round trip each, and a kind whose CRD is absent becomes a plain `Error`, not a
 *    404); every call of ours names a ResourceType with its plural and scope, so it is answered from that.
 * 3. The `status` subresource. `KubernetesObjectApi` addresses objects only (`specUriPath` has no
 *    subresource); `patchStatus` builds the `/status` URL with client-node's own path builder.
 */
import {
  type Configuration,
  HttpMethod,
  type KubernetesObject,
  KubernetesObjectApi,
  type ResponseContext,
  type V1APIResource,
} from '@kubernetes/client-node';
import type { ObjectRef, ResourceType } from './objects.ts';

type Header = { apiVersion: string; kind: string; metadata: { name?: string; namespace?: string } };

const headerOf = (type: ResourceType, ref?: Partial<ObjectRef>): Header => ({
  apiVersion: type.apiVersion,
  kind: type.kind,
  metadata: {
    ...(ref?.name ? { name: ref.name } : {}),
    ...(ref?.namespace ? { namespace: ref.namespace } : {}),
  },
});

export class WireObjectApi extends KubernetesObjectApi {
  private readonly known = new Map<string, ResourceType>();

  /** Makes `type` addressable without discovery; answers the header of an object of it. */
  header(type: ResourceType, ref?: Partial<ObjectRef>): Header {
    this.known.set(`${type.apiVersion}/${type.kind}`, type);
    return headerOf(type, ref);
  }

  protected override async resource(
    apiVersion: string,
    kind: string,
    options?: Configuration,
  ): Promise<V1APIResource | undefined> {
    const k = this.known.get(`${apiVersion}/${kind}`);
    if (!k) return super.resource(apiVersion, kind, options);
    return { kind: k.kind, name: k.plural, namespaced: k.namespaced, singularName: '', verbs: [] };
  }

  protected override async processResponse<T extends KubernetesObject>(
    response: ResponseContext,
    type?: string,
  ): Promise<T> {
    if (response.httpStatusCode < 200 || response.httpStatusCode > 299)
      return super.processResponse<T>(response, type);
    const text = await response.body.text();
    return (text === '' ? {} : JSON.parse(text)) as T;
  }

  /** The URL path of a kind's collection (in a namespace, or cluster-wide), e.g. for a watch. */
  collectionPath(type: ResourceType, namespace?: string): Promise<string> {
    return this.specUriPath(this.header(type, namespace ? { namespace } : {}) as KubernetesObject, 'list');
  }

  /** A patch (`contentType`: merge, JSON or apply patch) of the object's `status` subresource. */
  async patchStatus<T extends KubernetesObject>(
    type: ResourceType,
    ref: ObjectRef,
    patch: unknown,
    contentType: string,
    fieldManager: string,
  ): Promise<T> {
    const path = `${await this.specUriPath(this.header(type, ref) as KubernetesObject, 'patch')}/status`;
    const ctx = this.configuration.baseServer.makeRequestContext(path, HttpMethod.PATCH);
    ctx.setHeaderParam('Accept', 'application/json');
    ctx.setHeaderParam('Content-Type', contentType);
    ctx.setQueryParam('fieldManager', fieldManager);
    ctx.setBody(JSON.stringify(patch));
    return this.requestPromise<T>(ctx);
  }
}
