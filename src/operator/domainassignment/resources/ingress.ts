/**
 * The Ingress for an assigned DomainAssignment: its hostname → the gateway Service (the gateway maps
 * the Host header to the app). It lives in the gateway's namespace, because an Ingress can only send
 * traffic to a Service of its own namespace, and is owned by that Service: uninstalling the platform
 * (which deletes the gateway Service) garbage-collects every domain route, with no operator running.
 */
import { createHash } from 'node:crypto';
import { type DomainAssignment, MANAGED_BY } from '../../../apis/v1alpha1/types.ts';
import type { Ingress, Service } from '../../../shared/kube/objects.ts';
import { withIntentHash } from '../../runtime/desired-state.ts';

export interface IngressSettings {
  gatewayNamespace: string;
  gatewayService: string;
  gatewayPort: number;
  ingressClass: string | undefined;
}

/** The finalizer earlier versions put on DomainAssignments; the operator now removes it. */
export const LEGACY_FINALIZER = 'apphost.dev/domain-cleanup';
/** On the Ingress: which DomainAssignment (namespace/name) it serves. */
export const DOMAIN_ASSIGNMENT_ANNOTATION = 'apphost.dev/domain-assignment';
export const APP_ANNOTATION = 'apphost.dev/app';
export const APP_NAMESPACE_ANNOTATION = 'apphost.dev/app-namespace';
export const DOMAIN_COMPONENT_LABEL = 'app.kubernetes.io/component';

const boundedName = (base: string): string => {
  if (base.length <= 253) return base;
  const hash = createHash('sha256').update(base).digest('hex').slice(0, 10);
  return `${base.slice(0, 242).replace(/[.-]+$/, '')}-${hash}`;
};

/**
 * A DNS-subdomain name unique per DomainAssignment (hashed when too long). A namespace is a DNS label
 * (no '.'), so the first '.' separates it from the name: `domain-<namespace>.<name>`.
 */
export function ingressName(da: { metadata: { namespace?: string; name: string } }): string {
  return boundedName(`domain-${da.metadata.namespace}.${da.metadata.name}`.toLowerCase());
}

/**
 * The earlier, ambiguous name `domain-<namespace>-<name>` (namespace a-b + name c met namespace a +
 * name b-c); an Ingress still under it is removed by the reconciler.
 */
export function legacyIngressName(da: { metadata: { namespace?: string; name: string } }): string {
  return boundedName(`domain-${da.metadata.namespace}-${da.metadata.name}`.toLowerCase());
}

export function makeIngress(da: DomainAssignment, s: IngressSettings, gateway: Service): Ingress {
  const host = da.spec.hostname;
  const owner = [
    { apiVersion: 'v1', kind: 'Service', name: gateway.metadata.name, uid: gateway.metadata.uid ?? '' },
  ];
  return withIntentHash({
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: {
      name: ingressName(da),
      namespace: s.gatewayNamespace,
      labels: {
        'app.kubernetes.io/managed-by': MANAGED_BY,
        'app.kubernetes.io/part-of': 'apphost',
        [DOMAIN_COMPONENT_LABEL]: 'domain',
      },
      annotations: {
        [DOMAIN_ASSIGNMENT_ANNOTATION]: `${da.metadata.namespace}/${da.metadata.name}`,
        [APP_ANNOTATION]: da.spec.appName ?? '',
        [APP_NAMESPACE_ANNOTATION]: da.metadata.namespace ?? '',
      },
      // Not a controller reference, and not blocking the Service's deletion (that would need a
      // finalizer permission on Services): it only ties the Ingress's lifetime to the gateway's.
      ownerReferences: owner,
    },
    spec: {
      ...(s.ingressClass ? { ingressClassName: s.ingressClass } : {}),
      ...(da.spec.tlsSecretName ? { tls: [{ hosts: [host], secretName: da.spec.tlsSecretName }] } : {}),
      rules: [
        {
          host,
          http: {
            paths: [
              {
                path: '/',
                pathType: 'Prefix',
                backend: { service: { name: s.gatewayService, port: { number: s.gatewayPort } } },
              },
            ],
          },
        },
      ],
    },
  });
}
