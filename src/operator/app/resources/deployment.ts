/** The Deployment that runs an App: a pure function of the App and the operator's settings. */
import type { V1Container, V1PodSpec, V1Probe, V1ResourceRequirements } from '@kubernetes/client-node';
import { deploymentReplicas, effectiveScaling } from '../../../apis/v1alpha1/scaling.ts';
import { type App, DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS, Runtime } from '../../../apis/v1alpha1/types.ts';
import { DEFAULT_PLATFORM_IMAGE } from '../../../shared/images.ts';
import type { Deployment } from '../../../shared/kube/objects.ts';
import { withIntentHash } from '../../runtime/desired-state.ts';
import { type ArtifactFetchSettings, artifactPodParts } from './artifacts.ts';
import {
  appLabels,
  appOwnerReference,
  appSelector,
  CONTAINER_NAME,
  CORTEX_PORT,
  HTTP_PORT_NAME,
} from './labels.ts';

export interface DeploymentSettings {
  runtimeImage: string;
  terminationGraceMarginSeconds: number;
  /** How long a container may take to answer its first probe before the kubelet restarts it. */
  appStartupTimeoutSeconds: number;
  /** How apps deployed with `apphost deploy` get their code (defaults: DEFAULT_ARTIFACT_FETCH). */
  artifactFetch?: ArtifactFetchSettings;
  /**
   * A stopping pod keeps serving this long before it gets SIGTERM (preStop sleep), so the gateways
   * have removed it from routing (its EndpointSlice update) before it refuses calls. 0 = none.
   */
  preStopDelaySeconds?: number;
}

export const DEFAULT_ARTIFACT_FETCH: ArtifactFetchSettings = {
  platformImage: DEFAULT_PLATFORM_IMAGE,
  natsUrl: 'nats://127.0.0.1:4222',
};

export const CODE_VOLUME = 'code';
export const APP_DIR = '/app';
export const GPU_RESOURCE = 'nvidia.com/gpu';
/** The one writable place in an App's containers (the root filesystem is read-only). */
export const TMP_VOLUME = 'tmp';
export const TMP_DIR = '/tmp';
/** uid and gid App containers run as: the runtime image's `app` user (runtime/python/Dockerfile). */
export const APP_UID = 10001;
/** The startup probe's period: a replica is Ready about this long after it listens (scale from zero). */
export const STARTUP_PROBE_PERIOD_SECONDS = 1;

export function containerPort(app: App): number {
  return app.spec.runtime === Runtime.Custom ? (app.spec.port ?? CORTEX_PORT) : CORTEX_PORT;
}

export function graceSeconds(app: App): number {
  return app.spec.responseGracePeriodSeconds ?? DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS;
}

function resources(app: App): V1ResourceRequirements | undefined {
  const r = app.spec.resources;
  if (!r) return undefined;
  const requests: Record<string, string> = {};
  const limits: Record<string, string> = {};
  if (r.cpu) requests.cpu = r.cpu;
  if (r.memory) {
    requests.memory = r.memory;
    // Memory is not compressible: a pod past its request is what gets OOM-killed, so cap it there.
    limits.memory = r.memory;
  }
  if (r.gpu) limits[GPU_RESOURCE] = String(r.gpu);
  const out: V1ResourceRequirements = {};
  if (Object.keys(requests).length) out.requests = requests;
  if (Object.keys(limits).length) out.limits = limits;
  return Object.keys(out).length ? out : undefined;
}

/**
 * The startup probe asks every second until the app first answers (bounded by the startup timeout);
 * only then do readiness and liveness start, and the kubelet runs the readiness probe at once, so a
 * replica is Ready within a second of listening instead of at the next 5 s readiness period.
 */
function probes(
  app: App,
  s: DeploymentSettings,
): { startupProbe: V1Probe; readinessProbe: V1Probe; livenessProbe: V1Probe } {
  const custom = app.spec.runtime === Runtime.Custom;
  const readyPath = custom ? (app.spec.readinessPath ?? app.spec.healthcheckPath ?? '/') : '/ready';
  const livePath = custom ? (app.spec.healthcheckPath ?? '/') : '/health';
  return {
    startupProbe: {
      httpGet: { path: readyPath, port: HTTP_PORT_NAME },
      periodSeconds: STARTUP_PROBE_PERIOD_SECONDS,
      failureThreshold: Math.max(1, Math.ceil(s.appStartupTimeoutSeconds / STARTUP_PROBE_PERIOD_SECONDS)),
    },
    readinessProbe: {
      httpGet: { path: readyPath, port: HTTP_PORT_NAME },
      periodSeconds: 5,
      failureThreshold: 3,
    },
    livenessProbe: {
      httpGet: { path: livePath, port: HTTP_PORT_NAME },
      periodSeconds: 10,
      failureThreshold: 6,
    },
  };
}

/**
 * Pod Security `restricted` for every container (init containers included, whoever adds them): a
 * fixed non-root uid, no privilege escalation, no capabilities, the runtime's seccomp profile, a
 * read-only root filesystem with an emptyDir at /tmp, and no API token unless the App asks for one.
 * A container's termination message is what it wrote to /dev/termination-log (the cortex runtime
 * writes its import error there), else its last log lines when it exited with an error.
 */
export function hardenPod(app: App, pod: V1PodSpec): V1PodSpec {
  const harden = (c: V1Container): V1Container => ({
    ...c,
    terminationMessagePolicy: 'FallbackToLogsOnError',
    securityContext: {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    },
    volumeMounts: [...(c.volumeMounts ?? []), { name: TMP_VOLUME, mountPath: TMP_DIR }],
  });
  return {
    ...pod,
    automountServiceAccountToken: app.spec.automountServiceAccountToken ?? false,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: APP_UID,
      runAsGroup: APP_UID,
      seccompProfile: { type: 'RuntimeDefault' },
    },
    ...(pod.initContainers ? { initContainers: pod.initContainers.map(harden) } : {}),
    containers: pod.containers.map(harden),
    volumes: [...(pod.volumes ?? []), { name: TMP_VOLUME, emptyDir: {} }],
  };
}

export function makeDeployment(app: App, s: DeploymentSettings): Deployment {
  const name = app.metadata.name;
  const custom = app.spec.runtime === Runtime.Custom;
  const port = containerPort(app);
  const grace = graceSeconds(app);
  const preStop = s.preStopDelaySeconds ?? 0;
  const configMap = custom ? undefined : app.spec.code?.configMapRef?.name;
  const fetched = custom
    ? undefined
    : artifactPodParts(app, s.artifactFetch ?? DEFAULT_ARTIFACT_FETCH, CODE_VOLUME, APP_DIR);
  const command = custom
    ? app.spec.entrypoint
    : [
        'python',
        '-m',
        'apphost_runtime',
        '--app-dir',
        APP_DIR,
        '--port',
        String(port),
        '--grace-seconds',
        String(grace),
        ...(fetched?.runtimeArgs ?? []),
      ];
  const env = [
    { name: 'APPHOST_APP_NAME', value: name },
    // The runtime user's home is /app, read-only: libraries that cache under ~ write to /tmp instead.
    ...(custom ? [] : [{ name: 'HOME', value: TMP_DIR }]),
    // The runtime refuses (429) one call more than this: the exact limit behind several gateways.
    { name: 'APPHOST_MAX_CONCURRENCY', value: String(effectiveScaling(app.spec.scaling).replicaConcurrency) },
    ...(app.spec.env ?? []).map((e) =>
      e.valueFrom ? { name: e.name, valueFrom: e.valueFrom } : { name: e.name, value: e.value ?? '' },
    ),
  ];
  const container: V1Container = {
    name: CONTAINER_NAME,
    image: app.spec.image ?? s.runtimeImage,
    ...(command?.length ? { command } : {}),
    ports: [{ name: HTTP_PORT_NAME, containerPort: port, protocol: 'TCP' }],
    env,
    ...(app.spec.envFromSecrets?.length
      ? { envFrom: app.spec.envFromSecrets.map((secret) => ({ secretRef: { name: secret } })) }
      : {}),
    ...(resources(app) ? { resources: resources(app) } : {}),
    ...probes(app, s),
    ...(preStop > 0 ? { lifecycle: { preStop: { sleep: { seconds: preStop } } } } : {}),
    ...(configMap ? { volumeMounts: [{ name: CODE_VOLUME, mountPath: APP_DIR, readOnly: true }] } : {}),
    ...(fetched ? { volumeMounts: fetched.mounts } : {}),
  };
  return withIntentHash({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name,
      namespace: app.metadata.namespace,
      labels: appLabels(app),
      ownerReferences: [appOwnerReference(app)],
    },
    spec: {
      replicas: deploymentReplicas(app),
      selector: { matchLabels: appSelector(app) },
      template: {
        metadata: { labels: appLabels(app) },
        spec: hardenPod(app, {
          // After the preStop pause, an in-flight run may take responseGracePeriodSeconds; the margin
          // lets the runtime exit cleanly.
          terminationGracePeriodSeconds: preStop + grace + s.terminationGraceMarginSeconds,
          enableServiceLinks: false,
          ...(fetched ? { initContainers: [fetched.initContainer] } : {}),
          containers: [container],
          ...(configMap ? { volumes: [{ name: CODE_VOLUME, configMap: { name: configMap } }] } : {}),
          ...(fetched ? { volumes: fetched.volumes } : {}),
        }),
      },
    },
  });
}
