/**
 * The operator's settings: every bound and name it uses, with documented defaults (docs/operator.md).
 * main.ts reads the environment with `readOperatorEnv`; tests build settings with `defaultOperatorSettings`.
 */
import { hostname } from 'node:os';
import { z } from 'zod';
import type { AutoscalerLoopSettings } from '../autoscaler/loop.ts';
import {
  autoscalerEnv,
  autoscalerSettings,
  DEFAULT_AUTOSCALER_LOOP_SETTINGS,
  panicWithinStable,
} from '../autoscaler/settings.ts';
import type { BackoffSettings } from '../shared/backoff.ts';
import { DEFAULT_RUNTIME_IMAGE } from '../shared/images.ts';
import { DEFAULT_CLUSTER_DOMAIN } from '../shared/kube/cluster-domain.ts';
import { commonEnv, int, optionalText, readEnv, text } from '../shared/settings.ts';
import type { ArtifactFetchSettings } from './app/resources/artifacts.ts';
import { DEFAULT_ARTIFACT_FETCH } from './app/resources/deployment.ts';
import type { LeaderElectionSettings } from './runtime/leader-election.ts';

export interface OperatorSettings {
  /** Image for `cortex` Apps that name none (the runtime base image). */
  runtimeImage: string;
  /** The init container that fetches a deployed App's code: the platform image and the artifact store's NATS. */
  artifactFetch: ArtifactFetchSettings;
  /** Where the gateway Service is: every DomainAssignment's Ingress routes there. */
  gatewayNamespace: string;
  gatewayService: string;
  gatewayPort: number;
  /** ingressClassName for our Ingresses; unset → the cluster's default class. */
  ingressClass: string | undefined;
  /** Added to responseGracePeriodSeconds for terminationGracePeriodSeconds (time to flush and exit). */
  terminationGraceMarginSeconds: number;
  /** How long an App container may take to answer its first probe before the kubelet restarts it. */
  appStartupTimeoutSeconds: number;
  /** preStop pause of App pods, covering endpoint propagation to the gateways (0 = none). */
  preStopDelaySeconds: number;
  /** The cluster's DNS domain, for App URLs (APPHOST_CLUSTER_DOMAIN, else the pod's resolv.conf). */
  clusterDomain: string;
  leaderElection: LeaderElectionSettings;
  /** Only watch and reconcile this namespace (single-tenant installs, tests); all namespaces when unset. */
  watchNamespace: string | undefined;
  /** Every cached object is reconciled again this often even without an event. */
  resyncPeriodMs: number;
  /** Server-side bound on one watch request before it is reopened. */
  watchTimeoutSeconds: number;
  /** A watch silent for this long (no event, no bookmark) is dropped and reopened. */
  watchIdleTimeoutMs: number;
  /** Bound on one non-watch API request. */
  requestTimeoutMs: number;
  /** Concurrent reconciles per controller. */
  workers: number;
  /** Retry backoff for failed reconciles and failed watches. */
  backoff: BackoffSettings;
  /** How long SIGTERM may take in total. */
  shutdownTimeoutMs: number;
  /** The autoscaler's windows and bounds (docs/scaling.md). */
  autoscaler: AutoscalerLoopSettings;
}

export { DEFAULT_AUTOSCALER_LOOP_SETTINGS, DEFAULT_RUNTIME_IMAGE };

export function defaultOperatorSettings(overrides: Partial<OperatorSettings> = {}): OperatorSettings {
  return {
    runtimeImage: DEFAULT_RUNTIME_IMAGE,
    artifactFetch: DEFAULT_ARTIFACT_FETCH,
    gatewayNamespace: 'apphost-system',
    gatewayService: 'apphost-gateway',
    gatewayPort: 80,
    ingressClass: undefined,
    terminationGraceMarginSeconds: 10,
    appStartupTimeoutSeconds: 300,
    preStopDelaySeconds: 5,
    clusterDomain: DEFAULT_CLUSTER_DOMAIN,
    leaderElection: {
      namespace: 'apphost-system',
      leaseName: 'apphost-operator',
      identity: `${hostname()}_${process.pid}`,
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      releaseOnStop: true,
    },
    watchNamespace: undefined,
    resyncPeriodMs: 300_000,
    watchTimeoutSeconds: 300,
    watchIdleTimeoutMs: 600_000,
    requestTimeoutMs: 30_000,
    workers: 4,
    backoff: { baseDelayMs: 200, maxDelayMs: 60_000 },
    shutdownTimeoutMs: 30_000,
    autoscaler: DEFAULT_AUTOSCALER_LOOP_SETTINGS,
    ...overrides,
  };
}

/** Every variable the operator reads (docs/operator.md). */
export const OperatorEnv = z
  .object({
    ...commonEnv,
    KUBECONFIG: optionalText(),
    APPHOST_RUNTIME_IMAGE: text(DEFAULT_RUNTIME_IMAGE),
    APPHOST_PLATFORM_IMAGE: text(DEFAULT_ARTIFACT_FETCH.platformImage),
    NATS_URL: text(DEFAULT_ARTIFACT_FETCH.natsUrl),
    APPHOST_GATEWAY_NAMESPACE: text('apphost-system'),
    APPHOST_GATEWAY_SERVICE: text('apphost-gateway'),
    APPHOST_GATEWAY_PORT: int(80, { min: 1, max: 65_535 }),
    APPHOST_INGRESS_CLASS: optionalText(),
    APPHOST_OPERATOR_NAMESPACE: text('apphost-system'),
    APPHOST_OPERATOR_LEASE_NAME: text('apphost-operator'),
    APPHOST_OPERATOR_IDENTITY: optionalText(),
    APPHOST_OPERATOR_LEASE_DURATION_MS: int(15_000, { min: 1000 }),
    APPHOST_OPERATOR_RENEW_DEADLINE_MS: int(10_000, { min: 500 }),
    APPHOST_OPERATOR_RETRY_PERIOD_MS: int(2_000, { min: 100 }),
    APPHOST_OPERATOR_WATCH_NAMESPACE: optionalText(),
    APPHOST_OPERATOR_RESYNC_MS: int(300_000, { min: 1000 }),
    APPHOST_OPERATOR_WATCH_TIMEOUT_SECONDS: int(300, { min: 1 }),
    APPHOST_OPERATOR_WATCH_IDLE_TIMEOUT_MS: int(600_000, { min: 1000 }),
    APPHOST_OPERATOR_REQUEST_TIMEOUT_MS: int(30_000, { min: 100 }),
    APPHOST_OPERATOR_WORKERS: int(4, { min: 1 }),
    APPHOST_OPERATOR_BACKOFF_BASE_MS: int(200, { min: 1 }),
    APPHOST_OPERATOR_BACKOFF_MAX_MS: int(60_000, { min: 1 }),
    APPHOST_OPERATOR_SHUTDOWN_TIMEOUT_MS: int(30_000, { min: 100 }),
    APPHOST_TERMINATION_GRACE_MARGIN_SECONDS: int(10),
    APPHOST_APP_STARTUP_TIMEOUT_SECONDS: int(300, { min: 1, max: 3600 }),
    APPHOST_PRESTOP_DELAY_SECONDS: int(5, { max: 300 }),
    APPHOST_CLUSTER_DOMAIN: optionalText(),
    ...autoscalerEnv,
  })
  .refine((e) => e.APPHOST_OPERATOR_RENEW_DEADLINE_MS < e.APPHOST_OPERATOR_LEASE_DURATION_MS, {
    path: ['APPHOST_OPERATOR_RENEW_DEADLINE_MS'],
    message: 'must be less than APPHOST_OPERATOR_LEASE_DURATION_MS',
  })
  .refine(...panicWithinStable);
export type OperatorEnv = z.output<typeof OperatorEnv>;

export function readOperatorEnv(env: NodeJS.ProcessEnv): OperatorEnv {
  return readEnv('operator', OperatorEnv, env);
}

export function operatorSettings(e: OperatorEnv): OperatorSettings {
  return defaultOperatorSettings({
    runtimeImage: e.APPHOST_RUNTIME_IMAGE,
    artifactFetch: { platformImage: e.APPHOST_PLATFORM_IMAGE, natsUrl: e.NATS_URL },
    gatewayNamespace: e.APPHOST_GATEWAY_NAMESPACE,
    gatewayService: e.APPHOST_GATEWAY_SERVICE,
    gatewayPort: e.APPHOST_GATEWAY_PORT,
    ingressClass: e.APPHOST_INGRESS_CLASS,
    terminationGraceMarginSeconds: e.APPHOST_TERMINATION_GRACE_MARGIN_SECONDS,
    appStartupTimeoutSeconds: e.APPHOST_APP_STARTUP_TIMEOUT_SECONDS,
    preStopDelaySeconds: e.APPHOST_PRESTOP_DELAY_SECONDS,
    autoscaler: autoscalerSettings(e),
    leaderElection: {
      namespace: e.APPHOST_OPERATOR_NAMESPACE,
      leaseName: e.APPHOST_OPERATOR_LEASE_NAME,
      identity: e.APPHOST_OPERATOR_IDENTITY || `${hostname()}_${process.pid}`,
      leaseDurationMs: e.APPHOST_OPERATOR_LEASE_DURATION_MS,
      renewDeadlineMs: e.APPHOST_OPERATOR_RENEW_DEADLINE_MS,
      retryPeriodMs: e.APPHOST_OPERATOR_RETRY_PERIOD_MS,
      releaseOnStop: true,
    },
    watchNamespace: e.APPHOST_OPERATOR_WATCH_NAMESPACE,
    resyncPeriodMs: e.APPHOST_OPERATOR_RESYNC_MS,
    watchTimeoutSeconds: e.APPHOST_OPERATOR_WATCH_TIMEOUT_SECONDS,
    watchIdleTimeoutMs: e.APPHOST_OPERATOR_WATCH_IDLE_TIMEOUT_MS,
    requestTimeoutMs: e.APPHOST_OPERATOR_REQUEST_TIMEOUT_MS,
    workers: e.APPHOST_OPERATOR_WORKERS,
    backoff: {
      baseDelayMs: e.APPHOST_OPERATOR_BACKOFF_BASE_MS,
      maxDelayMs: e.APPHOST_OPERATOR_BACKOFF_MAX_MS,
    },
    shutdownTimeoutMs: e.APPHOST_OPERATOR_SHUTDOWN_TIMEOUT_MS,
  });
}
