/**
 * apphost.dev/v1alpha1: the App and DomainAssignment custom resources, as TypeScript types.
 * crds/*.yaml is the schema the API server enforces; these types mirror it field by field, which
 * types.test.ts checks (fields, required ones, kinds of value, enums).
 */
export const GROUP = 'apphost.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

export const APP_PLURAL = 'apps';
export const DOMAIN_ASSIGNMENT_PLURAL = 'domainassignments';

/** A project is a namespace carrying this label; its value is the project_id. */
export const PROJECT_LABEL = 'apphost.dev/project';

/** `app.kubernetes.io/managed-by` of everything the operator makes for an App (its Service's EndpointSlices too). */
export const MANAGED_BY = 'apphost-operator';
export const MANAGED_SELECTOR = `app.kubernetes.io/managed-by=${MANAGED_BY}`;
/** The Service port (and EndpointSlice port) name of every App. */
export const HTTP_PORT_NAME = 'http';
/** Every pod of an App carries this label (value: the App's name); its code runs in this container. */
export const APP_LABEL = 'apphost.dev/app';
export const APP_CONTAINER_NAME = 'app';

export const Runtime = { Cortex: 'cortex', Custom: 'custom' } as const;
export type Runtime = (typeof Runtime)[keyof typeof Runtime];

export const DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS = 900;
export const MAX_RESPONSE_GRACE_PERIOD_SECONDS = 43_200;

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef: { name: string; key: string; optional?: boolean } };
}

/** How an App scales; defaults in scaling.ts (`effectiveScaling`). */
export interface ScalingSpec {
  minReplicas?: number;
  maxReplicas?: number;
  /** Calls one replica serves at once (hard limit). */
  replicaConcurrency?: number;
  /** Percent of replicaConcurrency the autoscaler aims for per replica. */
  targetUtilization?: number;
  /** Extra replicas kept while there is load. */
  scalingBuffer?: number;
  /** Seconds the load must stay lower before replicas are removed. */
  cooldownSeconds?: number;
}

/** A `sha256:<64 lowercase hex>` digest: how bundles and dependency sets are addressed in the artifact store. */
export type Sha256Digest = `sha256:${string}`;

export interface AppCode {
  /** A ConfigMap whose keys are the files of /app (the pre-deploy way; at most 1 MiB). */
  configMapRef?: { name: string };
  /**
   * Set by `apphost deploy`: the app's files and its built dependencies in the artifact store (NATS
   * Object Store), fetched and verified by an init container. A new digest changes the pod template.
   */
  artifacts?: { bundle: Sha256Digest; dependencies?: Sha256Digest };
}

export interface AppSpec {
  runtime: Runtime;
  /** Container image: the runtime image with code baked in, the runtime base image, or a custom image. */
  image?: string;
  /** The Python the app and its dependencies were built for (apphost.toml `python_version`). */
  pythonVersion?: string;
  /** cortex: where the code comes from when it is not baked into the image. */
  code?: AppCode;
  /** custom runtime settings. */
  port?: number;
  entrypoint?: string[];
  healthcheckPath?: string;
  readinessPath?: string;
  env?: EnvVar[];
  /** Secrets whose keys all become environment variables. */
  envFromSecrets?: string[];
  /** Mount the namespace's default ServiceAccount token into the pods (off: user code gets no API token). */
  automountServiceAccountToken?: boolean;
  resources?: { cpu?: string; memory?: string; gpu?: number };
  scaling?: ScalingSpec;
  responseGracePeriodSeconds?: number;
}

export interface AppStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  url?: string;
  readyReplicas?: number;
  replicas?: number;
  /** Replicas the autoscaler asks for (written by the autoscaler only). */
  desiredReplicas?: number;
  /** Calls in flight or queued, averaged over the stable window, when desiredReplicas was last decided. */
  observedConcurrency?: number;
}

export interface App {
  apiVersion: typeof API_VERSION;
  kind: 'App';
  metadata: ObjectMeta;
  spec: AppSpec;
  status?: AppStatus;
}

export interface DomainAssignmentSpec {
  hostname: string;
  /** The app this domain routes to; empty or absent when unassigned. */
  appName?: string;
  tlsSecretName?: string;
}

export interface DomainAssignmentStatus {
  observedGeneration?: number;
  conditions?: Condition[];
}

export interface DomainAssignment {
  apiVersion: typeof API_VERSION;
  kind: 'DomainAssignment';
  metadata: ObjectMeta;
  spec: DomainAssignmentSpec;
  status?: DomainAssignmentStatus;
}
