/**
 * Level-triggered reconcile of one App: make its Deployment and Service match the spec (server-side
 * apply, only when the live object differs), then report status. Unchanged input → no writes at all.
 */
import type { App, AppStatus } from '../../apis/v1alpha1/types.ts';
import type { Clock } from '../../shared/clock.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { type Lister, splitKey } from '../../shared/kube/informer.ts';
import {
  type Deployment,
  type ObjectWithMeta,
  type Pod,
  Resources,
  type ResourceType,
  type Service,
} from '../../shared/kube/objects.ts';
import type { Logger } from '../../shared/log.ts';
import { findCondition, kubeTime } from '../runtime/conditions.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import { firstDifference, isInPlace } from '../runtime/desired-state.ts';
import { type EventRecorder, EventType } from '../runtime/events.ts';
import { writeStatusIfChanged } from '../runtime/status-writer.ts';
import { POD_CAUSE_REASONS } from './pod-causes.ts';
import { type DeploymentSettings, makeDeployment } from './resources/deployment.ts';
import { appUrl } from './resources/labels.ts';
import { makeService } from './resources/service.ts';
import { AppReason, ConditionType, computeAppStatus, sameReconciledStatus } from './status.ts';

export interface AppReconcilerDeps {
  apps: Lister<App>;
  deployments: Lister<Deployment>;
  services: Lister<Service>;
  /** The App's pods (those labelled with its name), from the cache. */
  pods: { forApp(namespace: string, name: string): Pod[] };
  client: Pick<KubeClient, 'get' | 'apply' | 'mergePatch'>;
  events: EventRecorder;
  settings: DeploymentSettings;
  /** The cluster's DNS domain, for `status.url` (cluster.local by default). */
  clusterDomain?: string;
  clock: Clock;
  log: Logger;
}

export const AppEventReason = {
  Applied: 'Applied',
  ApplyFailed: 'ApplyFailed',
  NameConflict: 'NameConflict',
  StatusFailed: 'StatusUpdateFailed',
} as const;

/** Owned by this App (by uid), so ours to change. */
export function isOwnedBy(obj: ObjectWithMeta, owner: { metadata: { uid?: string } }): boolean {
  return Boolean(obj.metadata.ownerReferences?.some((r) => r.controller && r.uid === owner.metadata.uid));
}

class ConflictError extends Error {}

/** One object a reconcile applied. */
interface Applied {
  verb: 'created' | 'updated';
  /** Kind and name, e.g. `Deployment hello`. */
  what: string;
}

/** The Applied Event's message, by verb: `created Deployment hello and Service hello`. */
export function appliedMessage(done: readonly Applied[]): string {
  return (['created', 'updated'] as const)
    .map((verb) => ({ verb, whats: done.filter((d) => d.verb === verb).map((d) => d.what) }))
    .filter((g) => g.whats.length)
    .map((g) => `${g.verb} ${g.whats.join(' and ')}`)
    .join('; ');
}

export function createAppReconciler(
  deps: AppReconcilerDeps,
): (key: string) => Promise<ReconcileResult | undefined> {
  const assertOurs = (app: App, type: ResourceType, live: ObjectWithMeta | undefined) => {
    if (live && !isOwnedBy(live, app)) {
      throw new ConflictError(
        `a ${type.kind} named "${live.metadata.name}" already exists and is not managed by this App; rename or delete it`,
      );
    }
  };

  /** Applies `desired` unless the live object already matches; answers the object and what was done. */
  const ensure = async <T extends ObjectWithMeta>(
    type: ResourceType,
    desired: T,
    live: T | undefined,
  ): Promise<{ object: T; done?: Applied }> => {
    if (live && isInPlace(desired, live)) return { object: live };
    deps.log.debug(
      {
        kind: type.kind,
        name: desired.metadata.name,
        differs: live ? firstDifference(desired, live) : 'missing',
      },
      'applying',
    );
    const object = await deps.client.apply(type, desired);
    return {
      object,
      done: { verb: live ? 'updated' : 'created', what: `${type.kind} ${desired.metadata.name}` },
    };
  };

  /** A newly seen pod cause (image, crash, ...) is also an Event: `kubectl describe app` shows it. */
  const recordCause = async (app: App, status: AppStatus) => {
    const next = findCondition(status.conditions, ConditionType.Ready);
    const prev = findCondition(app.status?.conditions, ConditionType.Ready);
    if (!next?.reason || !POD_CAUSE_REASONS.has(next.reason)) return;
    if (prev?.reason === next.reason && prev.message === next.message) return;
    await deps.events.record(app, EventType.Warning, next.reason, next.message ?? next.reason);
  };

  const writeStatus = (app: App, status: ReturnType<typeof computeAppStatus>) =>
    writeStatusIfChanged(deps.client, Resources.App, app, status, sameReconciledStatus);

  return async (key) => {
    const { namespace, name } = splitKey(key);
    const app = deps.apps.get(namespace, name);
    // Gone or going: the garbage collector removes what we own through the owner references.
    if (!app || app.metadata.deletionTimestamp) return undefined;
    const now = kubeTime(deps.clock.now());
    const url = appUrl(app, deps.clusterDomain);
    let deployment: Deployment | undefined;
    try {
      // The caches hold only objects labelled as ours; one missing there may still exist unlabelled
      // (someone else's), so look before creating: a read, never a write, and only on that path.
      // Both looks at once: a new App's reconcile starts with two of them.
      const ref = { namespace, name };
      const [liveDeployment, liveService] = await Promise.all([
        deps.deployments.get(namespace, name) ?? deps.client.get<Deployment>(Resources.Deployment, ref),
        deps.services.get(namespace, name) ?? deps.client.get<Service>(Resources.Service, ref),
      ]);
      // Someone else's object of the same name: touch neither, say so.
      assertOurs(app, Resources.Deployment, liveDeployment);
      assertOurs(app, Resources.Service, liveService);
      // Independent objects: apply both at once; one Event says what changed (one write, not one per object).
      const [dep, svc] = await Promise.allSettled([
        ensure(Resources.Deployment, makeDeployment(app, deps.settings), liveDeployment),
        ensure(Resources.Service, makeService(app), liveService),
      ]);
      const done = [dep, svc].flatMap((r) =>
        r.status === 'fulfilled' && r.value.done ? [r.value.done] : [],
      );
      if (done.length) {
        await deps.events.record(app, EventType.Normal, AppEventReason.Applied, appliedMessage(done));
      }
      if (dep.status === 'rejected') throw dep.reason;
      if (svc.status === 'rejected') throw svc.reason;
      deployment = dep.value.object;
    } catch (err) {
      const conflict = err instanceof ConflictError;
      const message = conflict ? err.message : `could not apply the App's objects: ${String(err)}`;
      const reason = conflict ? AppReason.NameConflict : AppReason.ReconcileFailed;
      // A conflict persists until someone acts: say it once, not on every retry.
      const known = app.status?.conditions?.find((c) => c.type === 'Ready')?.reason === reason;
      if (!(conflict && known)) {
        await deps.events.record(
          app,
          EventType.Warning,
          conflict ? AppEventReason.NameConflict : AppEventReason.ApplyFailed,
          message,
        );
      }
      await writeStatus(
        app,
        computeAppStatus(app, { deployment, url, now, failure: { reason, message } }),
      ).catch((statusErr) => deps.log.warn({ key, err: String(statusErr) }, 'could not write App status'));
      throw err;
    }
    const pods = deps.pods.forApp(namespace, name);
    const status = computeAppStatus(app, { deployment, pods, url, now });
    await recordCause(app, status);
    await writeStatus(app, status);
    return undefined;
  };
}
