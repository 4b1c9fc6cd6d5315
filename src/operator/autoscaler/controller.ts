/**
 * The autoscaler in the operator: the loop (loop.ts) over the informer caches. A decision is written
 * as the App's `status.desiredReplicas` (with the observed concurrency behind it) and an Event; the
 * App reconciler turns it into the Deployment's replicas. Before a scale-down, pods still serving
 * calls get a higher `controller.kubernetes.io/pod-deletion-cost`, so idle replicas are removed first.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { Gauge, type Registry } from 'prom-client';
import { deploymentReplicas, effectiveScaling } from '../../apis/v1alpha1/scaling.ts';
import type { App } from '../../apis/v1alpha1/types.ts';
import { type AppDecision, describeDecision } from '../../autoscaler/autoscaler.ts';
import {
  type AutoscaledApp,
  type AutoscalerLoop,
  type AutoscalerLoopSettings,
  createAutoscalerLoop,
} from '../../autoscaler/loop.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { type Deployment, type KubeObject, POD_DELETION_COST, Resources } from '../../shared/kube/objects.ts';
import type { Logger } from '../../shared/log.ts';
import { type EventRecorder, EventType } from '../runtime/events.ts';

export { POD_DELETION_COST };
export const AutoscalerEventReason = { Scaled: 'Scaled' } as const;

export interface PodLister {
  /** Pods of one App (label apphost.dev/app). */
  forApp(namespace: string, appName: string): KubeObject[];
}

export interface AutoscalerControllerDeps {
  nc: NatsConnection;
  log: Logger;
  settings: AutoscalerLoopSettings;
  registry: Registry;
  client: Pick<KubeClient, 'mergePatch'>;
  events: EventRecorder;
  apps: { list(): App[]; get(namespace: string, name: string): App | undefined };
  deployments: { get(namespace: string | undefined, name: string): Deployment | undefined };
  pods?: PodLister;
  /** project_id of a project namespace, and back. */
  projectOf(namespace: string): string | undefined;
  namespaceOf(projectId: string): string | undefined;
  isLeader(): boolean;
  now?: () => number;
}

interface Scaled extends AutoscaledApp {
  app: App;
}

export function createAutoscalerController(deps: AutoscalerControllerDeps): AutoscalerLoop {
  const { log } = deps;
  const gauges = {
    desired: new Gauge({
      name: 'apphost_autoscaler_desired_replicas',
      help: 'Replicas the autoscaler asks for, per app.',
      labelNames: ['project', 'app'],
      registers: [deps.registry],
    }),
    ready: new Gauge({
      name: 'apphost_autoscaler_ready_replicas',
      help: 'Ready replicas, per app, as the autoscaler saw them.',
      labelNames: ['project', 'app'],
      registers: [deps.registry],
    }),
    observed: new Gauge({
      name: 'apphost_autoscaler_observed_concurrency',
      help: 'Calls in flight, queued or waiting as async runs, averaged over the stable window, per app.',
      labelNames: ['project', 'app'],
      registers: [deps.registry],
    }),
    panic: new Gauge({
      name: 'apphost_autoscaler_panic',
      help: '1 while the autoscaler is in panic mode for the app.',
      labelNames: ['project', 'app'],
      registers: [deps.registry],
    }),
  };

  const toScaled = (app: App): Scaled | undefined => {
    const ns = app.metadata.namespace ?? '';
    const project = deps.projectOf(ns);
    if (!project || app.metadata.deletionTimestamp) return undefined;
    const dep = deps.deployments.get(ns, app.metadata.name);
    return {
      app,
      key: `${project}/${app.metadata.name}`,
      scaling: effectiveScaling(app.spec.scaling),
      readyReplicas: dep?.status?.readyReplicas ?? 0,
      // Until the autoscaler has written a decision, the app runs what the Deployment builder chose.
      desiredReplicas: app.status?.desiredReplicas ?? deploymentReplicas(app),
      decided: app.status?.desiredReplicas !== undefined,
    };
  };

  /** Busy pods cost more to delete than idle ones; only pods whose cost changes are written. */
  const markDeletionCost = async (app: App, d: AppDecision) => {
    if (!deps.pods) return;
    const ns = app.metadata.namespace ?? '';
    const load = d.replicaLoad ?? {};
    for (const pod of deps.pods.forApp(ns, app.metadata.name)) {
      const ip = (pod.status as { podIP?: string } | undefined)?.podIP;
      const inflight = ip ? Object.entries(load).find(([id]) => id.startsWith(`${ip}:`))?.[1] : undefined;
      const cost = String(Math.round(inflight ?? 0));
      const current = pod.metadata.annotations?.[POD_DELETION_COST];
      if (current === cost || (current === undefined && cost === '0')) continue;
      await deps.client
        .mergePatch(
          { apiVersion: 'v1', kind: 'Pod', plural: 'pods', namespaced: true },
          { namespace: ns, name: pod.metadata.name },
          { metadata: { annotations: { [POD_DELETION_COST]: cost } } },
        )
        .catch((err: unknown) =>
          log.debug({ err, pod: pod.metadata.name }, 'could not set the deletion cost'),
        );
    }
  };

  return createAutoscalerLoop({
    nc: deps.nc,
    log,
    settings: deps.settings,
    ...(deps.now ? { now: deps.now } : {}),
    active: deps.isLeader,
    *apps() {
      for (const app of deps.apps.list()) {
        const s = toScaled(app);
        if (s) yield s;
      }
    },
    app(key) {
      const i = key.indexOf('/');
      const ns = deps.namespaceOf(key.slice(0, i));
      const app = ns ? deps.apps.get(ns, key.slice(i + 1)) : undefined;
      return app ? toScaled(app) : undefined;
    },
    observe(a, d) {
      const [project = '', app = ''] = a.key.split('/');
      gauges.desired.set({ project, app }, d.replicas);
      gauges.ready.set({ project, app }, a.readyReplicas);
      gauges.observed.set({ project, app }, d.stable);
      gauges.panic.set({ project, app }, d.panicking ? 1 : 0);
    },
    async scale(a, d) {
      const { app } = a as Scaled;
      const from = a.desiredReplicas;
      if (d.replicas < from) await markDeletionCost(app, d);
      await deps.client.mergePatch(
        Resources.App,
        { namespace: app.metadata.namespace, name: app.metadata.name },
        { status: { desiredReplicas: d.replicas, observedConcurrency: Math.round(d.stable * 100) / 100 } },
        'status',
      );
      if (d.replicas !== from) {
        await deps.events.record(
          app,
          EventType.Normal,
          AutoscalerEventReason.Scaled,
          describeDecision(d, from),
        );
      }
    },
  });
}
