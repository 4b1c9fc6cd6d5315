/** Names and labels of the objects made for an App. */
import {
  APP_CONTAINER_NAME,
  APP_LABEL,
  type App,
  HTTP_PORT_NAME,
  MANAGED_BY,
  MANAGED_SELECTOR,
} from '../../../apis/v1alpha1/types.ts';
import { DEFAULT_CLUSTER_DOMAIN } from '../../../shared/kube/cluster-domain.ts';
import type { OwnerReference } from '../../../shared/kube/objects.ts';

/** Selects everything we manage (informers watch only these). */
export { APP_LABEL, HTTP_PORT_NAME, MANAGED_BY, MANAGED_SELECTOR };
export const CONTAINER_NAME = APP_CONTAINER_NAME;
/** The port the cortex runtime listens on inside the pod. */
export const CORTEX_PORT = 8080;
export const SERVICE_PORT = 80;

export function appLabels(app: App): Record<string, string> {
  return {
    'app.kubernetes.io/name': app.metadata.name,
    'app.kubernetes.io/instance': app.metadata.name,
    'app.kubernetes.io/component': 'app',
    'app.kubernetes.io/managed-by': MANAGED_BY,
    'app.kubernetes.io/part-of': 'apphost',
    [APP_LABEL]: app.metadata.name,
  };
}

/** The pod selector: minimal and stable, since a Deployment's selector cannot change. */
export function appSelector(app: App): Record<string, string> {
  return { [APP_LABEL]: app.metadata.name };
}

export function appOwnerReference(app: App): OwnerReference {
  return {
    apiVersion: app.apiVersion,
    kind: 'App',
    name: app.metadata.name,
    uid: app.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The in-cluster URL the gateway proxies to (the App's Service, port 80). */
export function appUrl(app: App, clusterDomain = DEFAULT_CLUSTER_DOMAIN): string {
  return `http://${app.metadata.name}.${app.metadata.namespace}.svc.${clusterDomain}`;
}
