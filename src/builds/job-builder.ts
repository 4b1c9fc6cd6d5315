/**
 * The cluster's dependency builder: one Kubernetes Job per build, in the project's namespace.
 *
 *   init `fetch`    (platform image) the bundle and the assembled requirements, checked, into /work
 *   init `pip`      (runtime image)  pip install --target /work/deps, constrained by the runtime's own pins
 *   main `publish`  (platform image) pack /work/deps, store it by sha256, record it under the dependency key
 *
 * The pip step runs in the runtime image because the set must fit the Python that will import it (same
 * version, ABI and platform) and because the runtime's pins come from the runtime itself; the platform
 * image does the rest because it has the NATS client and the archive rules. pip's output streams into the
 * build log (pods/log, follow). A Job is named after its build, so a restarted worker finds it again.
 */

import { createInterface } from 'node:readline';
import { PassThrough } from 'node:stream';
import {
  BatchV1Api,
  CoreV1Api,
  type KubeConfig,
  Log,
  type V1Container,
  type V1ContainerStatus,
  type V1Job,
  type V1Pod,
} from '@kubernetes/client-node';
import type { Clock } from '../shared/clock.ts';
import { isConflict, isNotFound } from '../shared/kube/errors.ts';
import type { ProjectNamespaces } from '../shared/kube/projects.ts';
import { sha256Digest } from './archive.ts';
import type { ArtifactStore } from './artifact-store.ts';
import {
  BUILD_REQUIREMENTS_FILE,
  BuildFailure,
  type DependencyBuilder,
  type DependencyBuildResult,
  pipArgs,
  pipError,
} from './builder.ts';

export interface JobBuilderSettings {
  /** The runtime image (its Python runs pip). */
  runtimeImage: string;
  /** The platform image (fetch and publish). */
  platformImage: string;
  /** The artifact store's NATS, as the build pod reaches it. */
  natsUrl: string;
  /** The runtime image's Python, `3.11`: part of every dependency key, and what apphost.toml may ask for. */
  pythonVersion: string;
  /** The nodes' platform, e.g. `linux-x86_64`: part of every dependency key. */
  platform: string;
  /** Bound on a whole build Job (its activeDeadlineSeconds, and how long the worker watches it). */
  buildTimeoutMs: number;
  /** How often the Job is looked at. */
  pollMs: number;
  /** A finished Job is removed this long after (Kubernetes' TTL controller). */
  jobTtlSeconds: number;
  /** Requests and limits of the pip container. */
  resources: { cpu: string; memory: string };
  /** Lines of pip output kept to explain a failure. */
  tailLines: number;
}

export const DEFAULT_JOB_BUILDER_SETTINGS: Omit<
  JobBuilderSettings,
  'runtimeImage' | 'platformImage' | 'natsUrl'
> = {
  pythonVersion: '3.11',
  platform: 'linux-x86_64',
  buildTimeoutMs: 15 * 60_000,
  pollMs: 2_000,
  jobTtlSeconds: 3_600,
  resources: { cpu: '1', memory: '1Gi' },
  tailLines: 40,
};

export const BUILD_JOB_LABEL = 'apphost.dev/build';
export const jobName = (buildId: string) => `apphost-build-${buildId}`;
const WORK = '/work';
const APP_UID = 10001;

function container(c: V1Container): V1Container {
  return {
    ...c,
    terminationMessagePolicy: 'FallbackToLogsOnError',
    securityContext: {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    },
    volumeMounts: [
      { name: 'work', mountPath: WORK },
      { name: 'tmp', mountPath: '/tmp' },
    ],
  };
}

/** The Job of one build: a pure function of the build and the settings. */
export function makeBuildJob(
  b: {
    buildId: string;
    appName: string;
    bundle: string;
    requirements: string;
    requirementsDir: string;
    key: string;
  },
  namespace: string,
  s: JobBuilderSettings,
): V1Job {
  const reqPath = [
    WORK,
    'src',
    ...b.requirementsDir.split('/').filter(Boolean),
    BUILD_REQUIREMENTS_FILE,
  ].join('/');
  const nats = [{ name: 'NATS_URL', value: s.natsUrl }];
  const pip = pipArgs(`${WORK}/deps`, `${WORK}/constraints.txt`, reqPath)
    .map((a) => `'${a.replaceAll("'", "'\\''")}'`)
    .join(' ');
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: jobName(b.buildId),
      namespace,
      labels: {
        [BUILD_JOB_LABEL]: b.buildId,
        'apphost.dev/app': b.appName,
        'app.kubernetes.io/managed-by': 'apphost-management',
        'app.kubernetes.io/part-of': 'apphost',
      },
    },
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: Math.ceil(s.buildTimeoutMs / 1000),
      ttlSecondsAfterFinished: s.jobTtlSeconds,
      template: {
        metadata: { labels: { [BUILD_JOB_LABEL]: b.buildId } },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: APP_UID,
            runAsGroup: APP_UID,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          volumes: [
            { name: 'work', emptyDir: {} },
            { name: 'tmp', emptyDir: {} },
          ],
          initContainers: [
            container({
              name: 'fetch',
              image: s.platformImage,
              args: [
                'fetch-artifacts',
                '--bundle',
                b.bundle,
                '--into',
                `${WORK}/src`,
                '--file',
                `${b.requirements}:${reqPath}`,
              ],
              env: nats,
            }),
            container({
              name: 'pip',
              image: s.runtimeImage,
              workingDir: `${WORK}/src`,
              command: [
                'sh',
                '-c',
                `python -m apphost_runtime.constraints > ${WORK}/constraints.txt && exec python ${pip}`,
              ],
              env: [
                { name: 'HOME', value: '/tmp' },
                { name: 'PIP_CACHE_DIR', value: '/tmp/pip-cache' },
                { name: 'PYTHONDONTWRITEBYTECODE', value: '1' },
              ],
              resources: {
                requests: { cpu: s.resources.cpu, memory: s.resources.memory },
                limits: { memory: s.resources.memory },
              },
            }),
          ],
          containers: [
            container({
              name: 'publish',
              image: s.platformImage,
              args: ['publish-dependencies', '--dir', `${WORK}/deps`, '--key', b.key],
              env: nats,
            }),
          ],
        },
      },
    },
  };
}

const terminatedBadly = (st: V1ContainerStatus | undefined) =>
  st?.state?.terminated && st.state.terminated.exitCode !== 0 ? st.state.terminated : undefined;
const cannotPull = (statuses: V1ContainerStatus[]) =>
  statuses.find((st) => /ImagePull|ErrImage|InvalidImageName/.test(st.state?.waiting?.reason ?? ''));

export function createJobBuilder(deps: {
  kc: KubeConfig;
  projects: ProjectNamespaces;
  store: ArtifactStore;
  clock: Clock;
  settings: JobBuilderSettings;
}): DependencyBuilder {
  const s = deps.settings;
  const batch = deps.kc.makeApiClient(BatchV1Api);
  const core = deps.kc.makeApiClient(CoreV1Api);
  const logs = new Log(deps.kc);

  /** Streams a container's log lines (follow) until it ends or `signal`. */
  async function follow(
    namespace: string,
    pod: string,
    name: string,
    onLine: (line: string) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const out = new PassThrough();
    const lines = createInterface({ input: out, crlfDelay: Number.POSITIVE_INFINITY });
    lines.on('line', onLine);
    const ended = new Promise<void>((resolve) => lines.once('close', () => resolve()));
    const ac = await logs.log(namespace, pod, name, out, { follow: true });
    const stop = () => ac.abort();
    signal.addEventListener('abort', stop, { once: true });
    out.once('error', () => out.end());
    await ended;
    signal.removeEventListener('abort', stop);
  }

  return {
    target: async () => ({ pythonVersion: s.pythonVersion, platform: s.platform, runtime: s.runtimeImage }),

    async build(req, log, signal): Promise<DependencyBuildResult> {
      const namespace = await deps.projects.namespaceOf(req.projectId);
      if (!namespace)
        return {
          ok: false,
          failure: BuildFailure.Infrastructure,
          message: `project ${req.projectId} has no namespace`,
        };
      // The assembled requirements travel as an artifact too: the pod checks them like the bundle.
      const reqData = Buffer.from(req.requirements.text);
      const requirements = sha256Digest(reqData);
      await deps.store.put(requirements, reqData);
      const job = makeBuildJob(
        {
          buildId: req.buildId,
          appName: req.appName,
          bundle: req.bundle,
          requirements,
          requirementsDir: req.requirementsDir,
          key: req.key,
        },
        namespace,
        s,
      );
      const name = jobName(req.buildId);
      try {
        await batch.createNamespacedJob({ namespace, body: job });
        log(`build job ${namespace}/${name} created (pip runs in ${s.runtimeImage})`);
      } catch (err) {
        if (!isConflict(err)) throw err;
        log(`build job ${namespace}/${name} exists already: following it`);
      }

      const deadline = deps.clock.now() + s.buildTimeoutMs + 60_000;
      const tail: string[] = [];
      let following: Promise<void> | undefined;
      const followAbort = new AbortController();
      const stopFollow = () => followAbort.abort();
      signal.addEventListener('abort', stopFollow, { once: true });
      try {
        for (;;) {
          if (signal.aborted)
            return { ok: false, failure: BuildFailure.Infrastructure, message: 'the build was stopped' };
          let current: V1Job;
          try {
            current = await batch.readNamespacedJob({ name, namespace });
          } catch (err) {
            if (isNotFound(err))
              return {
                ok: false,
                failure: BuildFailure.Infrastructure,
                message: `build job ${name} was deleted`,
              };
            throw err;
          }
          const pods = await core.listNamespacedPod({
            namespace,
            labelSelector: `${BUILD_JOB_LABEL}=${req.buildId}`,
          });
          const pod: V1Pod | undefined = pods.items[0];
          const inits = pod?.status?.initContainerStatuses ?? [];
          const pipStatus = inits.find((c) => c.name === 'pip');
          if (
            !following &&
            pod?.metadata?.name &&
            (pipStatus?.state?.running || pipStatus?.state?.terminated)
          ) {
            following = follow(
              namespace,
              pod.metadata.name,
              'pip',
              (line) => {
                log(line);
                tail.push(line);
                if (tail.length > s.tailLines) tail.shift();
              },
              followAbort.signal,
            ).catch((err: unknown) => log(`(the pip log could not be followed: ${(err as Error).message})`));
          }
          const failed = current.status?.conditions?.find((c) => c.type === 'Failed' && c.status === 'True');
          const done = current.status?.conditions?.find((c) => c.type === 'Complete' && c.status === 'True');
          if (done) {
            await following;
            const digest = await deps.store.dependencySet(req.key);
            if (!digest)
              return {
                ok: false,
                failure: BuildFailure.Infrastructure,
                message: 'the build job finished but recorded no dependency set',
              };
            // The finished Job stays for inspection until its TTL (Kubernetes' TTL controller removes it).
            log(`dependency set ${digest}`);
            return { ok: true, digest };
          }
          const fetch = terminatedBadly(inits.find((c) => c.name === 'fetch'));
          const pip = terminatedBadly(pipStatus);
          const publish = terminatedBadly(pod?.status?.containerStatuses?.find((c) => c.name === 'publish'));
          if (pip) {
            await following;
            return {
              ok: false,
              failure: BuildFailure.PipFailed,
              message: pipError(tail.length ? tail : (pip.message ?? '').split('\n'), pip.exitCode),
            };
          }
          if (fetch)
            return {
              ok: false,
              failure: BuildFailure.Infrastructure,
              message: `fetching the bundle failed: ${fetch.message ?? `exit ${fetch.exitCode}`}`,
            };
          if (publish) {
            const why = publish.message ?? `exit ${publish.exitCode}`;
            return {
              ok: false,
              failure: /larger than|more than/.test(why)
                ? BuildFailure.TooLarge
                : BuildFailure.Infrastructure,
              message: `storing the dependency set failed: ${why.trim()}`,
            };
          }
          const stuck = cannotPull([...inits, ...(pod?.status?.containerStatuses ?? [])]);
          if (stuck)
            return {
              ok: false,
              failure: BuildFailure.Infrastructure,
              message: `the build pod cannot pull ${stuck.image}: ${stuck.state?.waiting?.message ?? stuck.state?.waiting?.reason}`,
            };
          if (failed)
            return {
              ok: false,
              failure:
                failed.reason === 'DeadlineExceeded' ? BuildFailure.Timeout : BuildFailure.Infrastructure,
              message:
                failed.reason === 'DeadlineExceeded'
                  ? `the build did not finish within ${Math.round(s.buildTimeoutMs / 1000)} s`
                  : `the build job failed: ${failed.reason ?? ''} ${failed.message ?? ''}`.trim(),
            };
          if (deps.clock.now() >= deadline)
            return {
              ok: false,
              failure: BuildFailure.Timeout,
              message: `the build did not finish within ${Math.round(s.buildTimeoutMs / 1000)} s`,
            };
          await deps.clock.sleep(s.pollMs, signal).catch(() => undefined);
        }
      } finally {
        signal.removeEventListener('abort', stopFollow);
        followAbort.abort();
      }
    },
  };
}
