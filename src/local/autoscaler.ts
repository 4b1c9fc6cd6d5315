/**
 * Local mode's autoscaler: the operator's loop (load reports and wake requests over NATS, the same
 * decision) over the app host's replica processes instead of Deployments. Each decision that changes
 * an app's replica count is logged with its reason and applied by starting or stopping processes.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { effectiveScaling } from '../apis/v1alpha1/scaling.ts';
import {
  type AutoscaledApp,
  type AutoscalerLoop,
  type AutoscalerLoopSettings,
  createAutoscalerLoop,
} from '../autoscaler/loop.ts';
import type { Logger } from '../shared/log.ts';
import type { AppHost } from './app-host.ts';

export function createLocalAutoscaler(deps: {
  nc: NatsConnection;
  host: AppHost;
  projectId: string;
  log: Logger;
  settings: AutoscalerLoopSettings;
}): AutoscalerLoop {
  const { host, projectId } = deps;
  const scaled = (name: string): AutoscaledApp | undefined => {
    const v = host.current(name);
    const counts = host.replicaCounts(name);
    // An app without a serving version has nothing to scale (its first version is not up yet).
    if (!v || !counts) return undefined;
    return {
      key: `${projectId}/${name}`,
      scaling: effectiveScaling(v.app.manifest.spec.scaling),
      readyReplicas: counts.ready,
      desiredReplicas: counts.desired,
    };
  };
  return createAutoscalerLoop({
    nc: deps.nc,
    log: deps.log,
    settings: deps.settings,
    active: () => true,
    *apps() {
      for (const name of host.names()) {
        const a = scaled(name);
        if (a) yield a;
      }
    },
    app(key) {
      const i = key.indexOf('/');
      return key.slice(0, i) === projectId ? scaled(key.slice(i + 1)) : undefined;
    },
    scale: (app, d) => host.scale(app.key.slice(app.key.indexOf('/') + 1), d.replicas),
  });
}
