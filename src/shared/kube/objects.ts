/**
 * The Kubernetes objects the platform reads and writes, in their wire form (what the API server sends:
 * times are RFC 3339 strings), and the kinds it addresses (`Resources`): apiVersion, kind, plural and
 * scope, so no request needs API discovery. Typed with @kubernetes/client-node's models where they are
 * wire-compatible.
 */
import type {
  V1DeploymentSpec,
  V1DeploymentStatus,
  V1EndpointSlice,
  V1IngressSpec,
  V1PodSpec,
  V1PodStatus,
  V1ServiceSpec,
} from '@kubernetes/client-node';
import {
  API_VERSION,
  APP_PLURAL,
  DOMAIN_ASSIGNMENT_PLURAL,
  type ObjectMeta,
} from '../../apis/v1alpha1/types.ts';

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
/** A Secret's values are base64 in `data` (wire form). */
export interface Secret extends KubeObject {
  type?: string;
  data?: Record<string, string>;
}
export interface Namespace extends KubeObject {
  status?: { phase?: string };
}
/** The gateway routes to the ready addresses of an App's EndpointSlices. */
export interface EndpointSlice extends KubeObject {
  addressType: V1EndpointSlice['addressType'];
  endpoints: V1EndpointSlice['endpoints'];
  ports?: V1EndpointSlice['ports'];
}
/** The fields of a core/v1 Event the operator writes and tests read. */
export interface KubeEvent extends KubeObject {
  involvedObject?: { apiVersion?: string; kind?: string; name?: string; namespace?: string; uid?: string };
  type?: string;
  reason?: string;
  message?: string;
  source?: { component?: string };
}

/** The ReplicaSet controller removes pods with a lower cost first (the autoscaler sets it). */
export const POD_DELETION_COST = 'controller.kubernetes.io/pod-deletion-cost';

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** A kind the platform addresses: what its URL needs (no API discovery). */
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
  Secret: { apiVersion: 'v1', kind: 'Secret', plural: 'secrets', namespaced: true },
  EndpointSlice: {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    plural: 'endpointslices',
    namespaced: true,
  },
} as const satisfies Record<string, ResourceType>;

export interface ObjectRef {
  namespace?: string | undefined;
  name: string;
}
