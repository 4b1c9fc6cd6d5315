/**
 * The operator: informers keep caches of Apps, DomainAssignments and what we own; the leader runs
 * the App and DomainAssignment controllers over them. Non-leaders only watch, so a standby can take
 * over with warm caches and two replicas never both write.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Registry } from 'prom-client';
import { type App, type DomainAssignment, PROJECT_LABEL } from '../apis/v1alpha1/types.ts';
import type { AutoscalerLoop } from '../autoscaler/loop.ts';
import { type Clock, systemClock } from '../shared/clock.ts';
import { createKubeClient, type KubeClient } from '../shared/kube/client.ts';
import { createInformer, type Informer, type InformerHandlers, objectKey } from '../shared/kube/informer.ts';
import {
  type Deployment,
  type Ingress,
  type KubeObject,
  type ObjectWithMeta,
  type Pod,
  Resources,
  type Service,
} from '../shared/kube/objects.ts';
import type { Logger } from '../shared/log.ts';
import { appHandlers, ownedHandlers, podAppKey, podHandlers, slimPod } from './app/controller.ts';
import { createAppReconciler } from './app/reconciler.ts';
import { MANAGED_SELECTOR } from './app/resources/labels.ts';
import { createAutoscalerController } from './autoscaler/controller.ts';
import {
  appToDomainHandlers,
  domainHandlers,
  gatewayServiceHandlers,
  ingressHandlers,
} from './domainassignment/controller.ts';
import { createDomainReconciler } from './domainassignment/reconciler.ts';
import { type Controller, createController } from './runtime/controller.ts';
import { createEventRecorder } from './runtime/events.ts';
import { combineHandlers } from './runtime/handlers.ts';
import { createLeaderElector } from './runtime/leader-election.ts';
import { createOperatorMetrics } from './runtime/metrics.ts';
import type { OperatorSettings } from './settings.ts';

export interface Operator {
  /** Starts watching, waits for the caches to fill, then campaigns for leadership. */
  start(): Promise<void>;
  /** Stops reconciling, hands the Lease back, stops watching. */
  stop(): Promise<void>;
  isLeader(): boolean;
  /** True once every cache has synced (the /readyz check). */
  ready(): boolean;
}

export interface OperatorDeps {
  kc: KubeConfig;
  log: Logger;
  registry: Registry;
  settings: OperatorSettings;
  clock?: Clock;
  /** A client to use instead of one built from `kc` (tests wrap the real one). */
  client?: KubeClient;
  /**
   * NATS, for the autoscaler's load reports (a promise: the operator reconciles while it connects);
   * without it nothing scales Apps (they run their minimum).
   */
  nc?: NatsConnection | Promise<NatsConnection>;
}

/** The field manager of the operator's writes (server-side apply ownership). */
export const FIELD_MANAGER = 'apphost-operator';

/** Bound on the first list of every watched type before start() gives up. */
export const CACHE_SYNC_TIMEOUT_MS = 60_000;

export function createOperator(deps: OperatorDeps): Operator {
  const { settings: s, log } = deps;
  const clock = deps.clock ?? systemClock;
  const metrics = createOperatorMetrics(deps.registry);
  const client =
    deps.client ??
    createKubeClient(deps.kc, {
      fieldManager: FIELD_MANAGER,
      requestTimeoutMs: s.requestTimeoutMs,
      watchIdleTimeoutMs: s.watchIdleTimeoutMs,
      onWrite: (verb, type) => metrics.writes.inc({ verb, resource: type.plural }),
    });
  const events = createEventRecorder({ client, clock, log, identity: s.leaderElection.identity });
  const informerSettings = {
    resyncPeriodMs: s.resyncPeriodMs,
    watchTimeoutSeconds: s.watchTimeoutSeconds,
    backoff: s.backoff,
  };

  // Controllers are created first (their enqueue is a no-op until they run); informers feed them.
  let apps!: Informer<App>;
  let domains!: Informer<DomainAssignment>;
  let deployments!: Informer<Deployment>;
  let services!: Informer<Service>;
  let pods!: Informer<Pod>;
  let ingresses!: Informer<Ingress>;
  let gatewayServices!: Informer<Service>;

  const appController: Controller = createController({
    name: 'app',
    workers: s.workers,
    backoff: s.backoff,
    metrics,
    log,
    reconcile: createAppReconciler({
      clusterDomain: s.clusterDomain,
      apps: { get: (ns, n) => apps.get(ns, n) },
      deployments: { get: (ns, n) => deployments.get(ns, n) },
      services: { get: (ns, n) => services.get(ns, n) },
      pods: { forApp: (ns, n) => pods.byIndex(`${ns}/${n}`) },
      client,
      events,
      settings: s,
      clock,
      log,
    }),
  });
  const domainController: Controller = createController({
    name: 'domainassignment',
    workers: s.workers,
    backoff: s.backoff,
    metrics,
    log,
    reconcile: createDomainReconciler({
      domains: { get: (ns, n) => domains.get(ns, n), list: () => domains.list() },
      apps: { get: (ns, n) => apps.get(ns, n) },
      ingresses: { get: (ns, n) => ingresses.get(ns, n) },
      gatewayService: () => gatewayServices.get(s.gatewayNamespace, s.gatewayService),
      client,
      events,
      settings: s,
      clock,
      log,
    }),
  });
  const enqueueApp = (k: string) => appController.enqueue(k);
  const enqueueDomain = (k: string) => domainController.enqueue(k);
  const allDomains = () => domains.list();

  const informer = <T extends ObjectWithMeta>(
    type: (typeof Resources)[keyof typeof Resources],
    handlers: InformerHandlers<T>,
    labelSelector?: string,
    namespace: string | undefined = s.watchNamespace,
    extra: Pick<Parameters<typeof createInformer<T>>[0], 'transform' | 'indexBy'> = {},
  ) =>
    createInformer<T>({
      client,
      type,
      namespace,
      settings: informerSettings,
      handlers,
      log,
      ...(labelSelector ? { labelSelector } : {}),
      ...extra,
    });

  apps = informer<App>(
    Resources.App,
    combineHandlers<App>(appHandlers(enqueueApp), appToDomainHandlers(enqueueDomain, allDomains)),
  );
  domains = informer<DomainAssignment>(Resources.DomainAssignment, domainHandlers(enqueueDomain, allDomains));
  deployments = informer<Deployment>(Resources.Deployment, ownedHandlers(enqueueApp), MANAGED_SELECTOR);
  services = informer<Service>(Resources.Service, ownedHandlers(enqueueApp), MANAGED_SELECTOR);
  // Only the pods of our Deployments, slimmed, indexed by App: their status says why an App is not ready.
  pods = informer<Pod>(Resources.Pod, podHandlers(enqueueApp), MANAGED_SELECTOR, s.watchNamespace, {
    transform: slimPod,
    indexBy: podAppKey,
  });
  // Our Ingresses all live in the gateway's namespace.
  ingresses = informer<Ingress>(
    Resources.Ingress,
    ingressHandlers(enqueueDomain),
    MANAGED_SELECTOR,
    s.gatewayNamespace,
  );
  // The gateway Service owns our Ingresses; the namespace holds a handful of Services.
  gatewayServices = informer<Service>(
    Resources.Service,
    gatewayServiceHandlers(s.gatewayService, enqueueDomain, allDomains),
    undefined,
    s.gatewayNamespace,
  );
  const informers: Informer<ObjectWithMeta>[] = [
    apps,
    domains,
    deployments,
    services,
    pods,
    ingresses,
    gatewayServices,
  ];

  // The autoscaler needs each App's project (its namespace's label) and, for scale-downs, its pods.
  let autoscaler: AutoscalerLoop | undefined;
  let startAutoscaler: (() => Promise<void>) | undefined;
  if (deps.nc) {
    const ncReady = Promise.resolve(deps.nc);
    const namespaces = createInformer<KubeObject>({
      client,
      type: Resources.Namespace,
      settings: informerSettings,
      handlers: {},
      labelSelector: PROJECT_LABEL,
      log,
    });
    informers.push(namespaces);
    const projectOf = (ns: string) => namespaces.get(undefined, ns)?.metadata.labels?.[PROJECT_LABEL];
    const make = (nc: NatsConnection) =>
      createAutoscalerController({
        nc,
        log: log.child({ component: 'autoscaler' }),
        settings: s.autoscaler,
        registry: deps.registry,
        client,
        events,
        apps: { list: () => apps.list(), get: (ns, n) => apps.get(ns, n) },
        deployments: { get: (ns, n) => deployments.get(ns, n) },
        pods: { forApp: (ns, app) => pods.byIndex(`${ns}/${app}`) },
        projectOf,
        namespaceOf: (project) =>
          namespaces.list().find((n) => n.metadata.labels?.[PROJECT_LABEL] === project)?.metadata.name,
        isLeader: () => elector.isLeader(),
        now: () => clock.now(),
      });
    startAutoscaler = async () => {
      const nc = await ncReady;
      if (stopping) return;
      autoscaler = make(nc);
      await autoscaler.start();
      log.info('autoscaler started');
    };
  }
  let stopping = false;

  const elector = createLeaderElector({
    client,
    settings: s.leaderElection,
    clock,
    log,
    onStartedLeading: () => {
      metrics.leader.set(1);
      appController.start();
      domainController.start();
      // A new leader trusts nothing: every object gets one look.
      for (const a of apps.list()) appController.enqueue(objectKey(a));
      for (const d of domains.list()) domainController.enqueue(objectKey(d));
      for (const i of ingresses.list()) ingressHandlers(enqueueDomain).onAdd?.(i);
    },
    onStoppedLeading: async () => {
      metrics.leader.set(0);
      await Promise.all([appController.stop(), domainController.stop()]);
    },
  });

  let started = false;
  return {
    async start() {
      if (started) return;
      started = true;
      for (const i of informers) i.start();
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`caches did not sync within ${CACHE_SYNC_TIMEOUT_MS} ms`)),
          CACHE_SYNC_TIMEOUT_MS,
        );
        timer.unref();
      });
      try {
        await Promise.race([Promise.all(informers.map((i) => i.waitForSync())), timeout]);
      } finally {
        clearTimeout(timer);
      }
      log.info('caches synced: campaigning for leadership');
      // Reconciling does not wait for NATS; the autoscaler starts once it is connected.
      startAutoscaler?.().catch((err: unknown) => log.error({ err }, 'the autoscaler could not start'));
      elector.start();
    },
    async stop() {
      stopping = true;
      await autoscaler?.stop();
      await elector.stop();
      await Promise.all(informers.map((i) => i.stop()));
    },
    isLeader: () => elector.isLeader(),
    ready: () => informers.every((i) => i.synced()),
  };
}
