/** The Service in front of an App's pods: port 80 named http → the container's port. */
import type { App } from '../../../apis/v1alpha1/types.ts';
import type { Service } from '../../../shared/kube/objects.ts';
import { withIntentHash } from '../../runtime/desired-state.ts';
import { containerPort } from './deployment.ts';
import { appLabels, appOwnerReference, appSelector, HTTP_PORT_NAME, SERVICE_PORT } from './labels.ts';

export function makeService(app: App): Service {
  return withIntentHash({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: app.metadata.name,
      namespace: app.metadata.namespace,
      labels: appLabels(app),
      ownerReferences: [appOwnerReference(app)],
    },
    spec: {
      type: 'ClusterIP',
      selector: appSelector(app),
      ports: [{ name: HTTP_PORT_NAME, port: SERVICE_PORT, targetPort: containerPort(app), protocol: 'TCP' }],
    },
  });
}
