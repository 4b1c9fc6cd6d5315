/**
 * Level-triggered reconcile of one DomainAssignment: an assigned domain whose App exists gets an
 * Ingress rule to the gateway; an unassigned, deleted or missing one (or one whose App is missing)
 * gets none. The Ingress lives in the gateway namespace, out of reach of an owner reference to the
 * domain, so its removal is level-triggered rather than held by a finalizer (which made deleting a
 * project namespace hang whenever the operator was not running, e.g. after an uninstall).
 */
import type { App, DomainAssignment } from '../../apis/v1alpha1/types.ts';
import type { Clock } from '../../shared/clock.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { isNotFound } from '../../shared/kube/errors.ts';
import { type Lister, splitKey } from '../../shared/kube/informer.ts';
import { type Ingress, Resources, type Service } from '../../shared/kube/objects.ts';
import type { Logger } from '../../shared/log.ts';
import { kubeTime } from '../runtime/conditions.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import { isInPlace } from '../runtime/desired-state.ts';
import { type EventRecorder, EventType } from '../runtime/events.ts';
import { sameStatus, writeStatusIfChanged } from '../runtime/status-writer.ts';
import {
  DOMAIN_ASSIGNMENT_ANNOTATION,
  type IngressSettings,
  ingressName,
  LEGACY_FINALIZER,
  legacyIngressName,
  makeIngress,
} from './resources/ingress.ts';
import {
  computeDomainStatus,
  markAppNotFound,
  markFailed,
  markGatewayNotFound,
  markHostnameConflict,
  markRouted,
  markUnassigned,
} from './status.ts';

export interface DomainReconcilerDeps {
  domains: Lister<DomainAssignment> & { list(): DomainAssignment[] };
  apps: Lister<App>;
  ingresses: Lister<Ingress>;
  /** The gateway Service, if it exists: our Ingresses route to it and are owned by it (they go with it). */
  gatewayService: () => Service | undefined;
  client: Pick<KubeClient, 'get' | 'apply' | 'mergePatch' | 'delete'>;
  events: EventRecorder;
  settings: IngressSettings;
  clock: Clock;
  log: Logger;
}

export const DomainEventReason = {
  Routed: 'Routed',
  RouteRemoved: 'RouteRemoved',
  AppNotFound: 'AppNotFound',
  GatewayNotFound: 'GatewayNotFound',
  HostnameConflict: 'HostnameConflict',
  ReconcileFailed: 'ReconcileFailed',
} as const;

const isOlder = (a: DomainAssignment, b: DomainAssignment): boolean => {
  const ta = a.metadata.creationTimestamp ?? '';
  const tb = b.metadata.creationTimestamp ?? '';
  if (ta !== tb) return ta < tb;
  return `${a.metadata.namespace}/${a.metadata.name}` < `${b.metadata.namespace}/${b.metadata.name}`;
};

/** The first-created other DomainAssignment with the same hostname, if it predates this one. */
export function hostnameOwner(da: DomainAssignment, all: DomainAssignment[]): DomainAssignment | undefined {
  const rivals = all.filter(
    (o) =>
      o.spec.hostname === da.spec.hostname &&
      !o.metadata.deletionTimestamp &&
      !(o.metadata.namespace === da.metadata.namespace && o.metadata.name === da.metadata.name),
  );
  return rivals.find((o) => isOlder(o, da));
}

export function createDomainReconciler(
  deps: DomainReconcilerDeps,
): (key: string) => Promise<ReconcileResult | undefined> {
  const ingressRef = (da: { metadata: { namespace?: string; name: string } }) => ({
    namespace: deps.settings.gatewayNamespace,
    name: ingressName(da),
  });

  /** Removes the route if we have one (checked in the cache first: a steady cluster sees no deletes). */
  const servesThis = (ing: Ingress, da: { metadata: { namespace?: string; name: string } }) =>
    ing.metadata.annotations?.[DOMAIN_ASSIGNMENT_ANNOTATION] ===
    `${da.metadata.namespace}/${da.metadata.name}`;

  /**
   * Removes the route if we have one. Normally the cache answers (a steady cluster sees no deletes);
   * `lookUp` reads the object first (on deletion, where the cache may lag), and only ours is deleted.
   */
  const removeRoute = async (da: DomainAssignment, lookUp = false): Promise<boolean> => {
    const ref = ingressRef(da);
    const live =
      deps.ingresses.get(ref.namespace, ref.name) ??
      (lookUp ? await deps.client.get<Ingress>(Resources.Ingress, ref) : undefined);
    if (!live || !servesThis(live, da)) return false;
    return deps.client.delete(Resources.Ingress, ref);
  };

  /** An Ingress of ours under the earlier naming scheme goes (cache only: a steady cluster sees no call). */
  const removeLegacyRoute = async (da: { metadata: { namespace?: string; name: string } }) => {
    const ref = { namespace: deps.settings.gatewayNamespace, name: legacyIngressName(da) };
    const live = deps.ingresses.get(ref.namespace, ref.name);
    if (live && servesThis(live, da)) await deps.client.delete(Resources.Ingress, ref);
  };

  const writeStatus = (da: DomainAssignment, ready: Parameters<typeof computeDomainStatus>[1]) =>
    writeStatusIfChanged(
      deps.client,
      Resources.DomainAssignment,
      da,
      computeDomainStatus(da, ready, kubeTime(deps.clock.now())),
      sameStatus,
    );

  return async (key) => {
    const { namespace, name } = splitKey(key);
    const da = deps.domains.get(namespace, name);
    await removeLegacyRoute({ metadata: { namespace, name } });
    if (!da) {
      // Deleted (while the operator ran, or before it started): its route goes.
      await removeRoute({
        apiVersion: 'apphost.dev/v1alpha1',
        kind: 'DomainAssignment',
        metadata: { namespace, name },
        spec: { hostname: '' },
      });
      return undefined;
    }
    // No finalizer: deleting a domain (or its namespace) never waits for the operator. The route is
    // removed level-triggered instead — here, on the delete event, and at every start (each Ingress
    // of ours brings its domain's key back; a missing domain means its Ingress goes).
    const finalizers = da.metadata.finalizers ?? [];
    if (finalizers.includes(LEGACY_FINALIZER)) {
      try {
        // resourceVersion makes this a compare-and-swap: a concurrent change is retried, never lost.
        await deps.client.mergePatch(
          Resources.DomainAssignment,
          { namespace, name },
          {
            metadata: {
              finalizers: finalizers.filter((f) => f !== LEGACY_FINALIZER),
              resourceVersion: da.metadata.resourceVersion,
            },
          },
        );
      } catch (err) {
        // Already gone: an earlier pass (seen through a stale cache) removed the finalizer.
        if (!isNotFound(err)) throw err;
      }
      // The update (or delete) event brings the domain back; continue from there.
      return undefined;
    }
    if (da.metadata.deletionTimestamp) {
      if (await removeRoute(da, true)) {
        await deps.events.record(
          da,
          EventType.Normal,
          DomainEventReason.RouteRemoved,
          `removed the route for ${da.spec.hostname}`,
        );
      }
      return undefined;
    }

    try {
      if (!da.spec.appName) {
        if (await removeRoute(da)) {
          await deps.events.record(
            da,
            EventType.Normal,
            DomainEventReason.RouteRemoved,
            `${da.spec.hostname} unassigned: route removed`,
          );
        }
        await writeStatus(da, markUnassigned(da));
        return undefined;
      }
      const owner = hostnameOwner(da, deps.domains.list());
      if (owner) {
        const other = `${owner.metadata.namespace}/${owner.metadata.name}`;
        await removeRoute(da);
        const ready = markHostnameConflict(da, other);
        if (da.status?.conditions?.find((c) => c.type === 'Ready')?.reason !== ready.reason) {
          await deps.events.record(
            da,
            EventType.Warning,
            DomainEventReason.HostnameConflict,
            ready.message ?? '',
          );
        }
        await writeStatus(da, ready);
        return undefined;
      }
      const app = deps.apps.get(namespace, da.spec.appName);
      if (!app || app.metadata.deletionTimestamp) {
        if (await removeRoute(da)) {
          await deps.events.record(
            da,
            EventType.Normal,
            DomainEventReason.RouteRemoved,
            `route for ${da.spec.hostname} removed`,
          );
        }
        const ready = markAppNotFound(da);
        if (da.status?.conditions?.find((c) => c.type === 'Ready')?.reason !== ready.reason) {
          await deps.events.record(da, EventType.Warning, DomainEventReason.AppNotFound, ready.message ?? '');
        }
        await writeStatus(da, ready);
        return undefined;
      }
      // No gateway, no route: while the platform is being uninstalled the gateway Service goes first,
      // and its Ingresses are garbage-collected; recreating them unowned would leave them behind.
      const gateway = deps.gatewayService();
      if (!gateway) {
        if (await removeRoute(da)) {
          await deps.events.record(
            da,
            EventType.Normal,
            DomainEventReason.RouteRemoved,
            `route for ${da.spec.hostname} removed: no gateway Service`,
          );
        }
        const ready = markGatewayNotFound(deps.settings.gatewayNamespace, deps.settings.gatewayService);
        if (da.status?.conditions?.find((c) => c.type === 'Ready')?.reason !== ready.reason) {
          await deps.events.record(
            da,
            EventType.Warning,
            DomainEventReason.GatewayNotFound,
            ready.message ?? '',
          );
        }
        await writeStatus(da, ready);
        return undefined;
      }
      const desired = makeIngress(da, deps.settings, gateway);
      const ref = ingressRef(da);
      // The cache holds only labelled Ingresses: look before creating, and never take over another's.
      const live =
        deps.ingresses.get(ref.namespace, ref.name) ??
        (await deps.client.get<Ingress>(Resources.Ingress, ref));
      if (live && !servesThis(live, da)) {
        throw new Error(
          `an Ingress named "${ref.name}" already exists in namespace ${ref.namespace} and is not this domain's; delete or rename it`,
        );
      }
      if (!isInPlace(desired, live)) {
        await deps.client.apply(Resources.Ingress, desired);
        await deps.events.record(
          da,
          EventType.Normal,
          DomainEventReason.Routed,
          `${da.spec.hostname} routed to app "${da.spec.appName}"`,
        );
      }
      await writeStatus(da, markRouted(da));
      return undefined;
    } catch (err) {
      const message = `could not reconcile the route: ${String(err)}`;
      await deps.events.record(da, EventType.Warning, DomainEventReason.ReconcileFailed, message);
      await writeStatus(da, markFailed(message)).catch((e) =>
        deps.log.warn({ key, err: String(e) }, 'could not write status'),
      );
      throw err;
    }
  };
}
