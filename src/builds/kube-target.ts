/**
 * The AppTarget of a cluster: a version is applied to the App resource with server-side apply (its
 * bundle and dependency set in `spec.code.artifacts`, the build id in an annotation); the operator rolls
 * the Deployment and reports it in the App's status, which is how a rollout is watched. A failed one is
 * rolled back by applying the previous spec again (or deleting an App that never served).
 */
import { type KubeConfig, KubernetesObjectApi, PatchStrategy } from '@kubernetes/client-node';
import {
  type AppConfig,
  type ConfigProblem,
  customRuntimeOf,
  runtimeOf,
} from '../apis/v1alpha1/app-config.ts';
import { appFromConfig, configFromApp } from '../apis/v1alpha1/app-config-mapping.ts';
import { APP_START_FAILURE_REASONS, AppReadyReason } from '../apis/v1alpha1/app-reasons.ts';
import { API_VERSION, type App, type AppSpec } from '../apis/v1alpha1/types.ts';
import { isNotFound } from '../shared/kube/errors.ts';
import type { ProjectNamespaces } from '../shared/kube/projects.ts';
import type { AppliedVersion, AppTarget, AppVersion, DeployedApp, RolloutStatus } from './app-target.ts';

/** Field manager of what deploys set on Apps (stable: changing it orphans field ownership). */
export const DEPLOY_FIELD_MANAGER = 'apphost-deploy';
/** The build that deployed the version an App runs. */
export const BUILD_ID_ANNOTATION = 'apphost.dev/build-id';

interface Previous {
  spec: AppSpec;
  buildId?: string;
}

const ref = (namespace: string, name: string) => ({
  apiVersion: API_VERSION,
  kind: 'App',
  metadata: { name, namespace },
});

function readyCondition(app: App) {
  return app.status?.conditions?.find((c) => c.type === 'Ready');
}

export function createKubeTarget(deps: { kc: KubeConfig; projects: ProjectNamespaces }): AppTarget {
  const api = KubernetesObjectApi.makeApiClient(deps.kc);

  const namespace = async (projectId: string) => {
    const ns = await deps.projects.namespaceOf(projectId);
    if (!ns) throw new Error(`project ${projectId} has no namespace`);
    return ns;
  };
  const read = async (ns: string, name: string): Promise<App | undefined> => {
    try {
      return (await api.read(ref(ns, name) as never)) as unknown as App;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  const apply = async (app: App): Promise<App> =>
    (await api.patch(
      app as never,
      undefined,
      undefined,
      DEPLOY_FIELD_MANAGER,
      true,
      PatchStrategy.ServerSideApply,
    )) as unknown as App;

  const describe = (projectId: string, app: App): DeployedApp => {
    const ready = readyCondition(app);
    const artifacts = app.spec.code?.artifacts;
    const buildId = app.metadata.annotations?.[BUILD_ID_ANNOTATION];
    const isReady = ready?.status === 'True';
    return {
      projectId,
      name: app.metadata.name,
      runtime: app.spec.runtime,
      ...(buildId ? { buildId } : {}),
      ...(artifacts?.bundle ? { bundle: artifacts.bundle } : {}),
      ...(artifacts?.dependencies ? { dependencies: artifacts.dependencies } : {}),
      ready: isReady,
      readyReplicas: app.status?.readyReplicas ?? 0,
      desiredReplicas: app.status?.desiredReplicas ?? app.status?.replicas ?? 0,
      ...(!isReady && ready?.message ? { message: ready.message } : {}),
      ...(app.metadata.creationTimestamp ? { createdAt: app.metadata.creationTimestamp } : {}),
      config: configFromApp(app).config as AppConfig,
    };
  };

  return {
    check(config) {
      const problems: ConfigProblem[] = [];
      const custom = customRuntimeOf(config);
      if (custom && !custom.image)
        problems.push({
          path: 'app.runtime.custom.image',
          message: 'is required on a cluster (the container image of your server)',
        });
      return problems;
    },

    async apply(projectId, version: AppVersion): Promise<AppliedVersion> {
      const ns = await namespace(projectId);
      const current = await read(ns, version.config.app.name);
      const desired = appFromConfig(version.config, {
        namespace: ns,
        annotations: { [BUILD_ID_ANNOTATION]: version.buildId },
        // A custom app runs its own image: its files are not fetched into the pod.
        ...(runtimeOf(version.config) === 'cortex' ? { artifacts: version.artifacts } : {}),
      });
      const applied = await apply(desired);
      const previousBuild = current?.metadata.annotations?.[BUILD_ID_ANNOTATION];
      const previous: Previous | undefined = current
        ? { spec: current.spec, ...(previousBuild ? { buildId: previousBuild } : {}) }
        : undefined;
      return {
        buildId: version.buildId,
        ...(applied.metadata.generation !== undefined ? { generation: applied.metadata.generation } : {}),
        ...(previous ? { previous } : {}),
      };
    },

    async rollout(projectId, appName, applied): Promise<RolloutStatus> {
      const app = await read(await namespace(projectId), appName);
      if (!app) return { phase: 'gone' };
      if (app.metadata.annotations?.[BUILD_ID_ANNOTATION] !== applied.buildId)
        return { phase: 'failed', message: 'another version was applied to the App meanwhile' };
      const ready = readyCondition(app);
      const progress = {
        ready: app.status?.readyReplicas ?? 0,
        desired: app.status?.desiredReplicas ?? app.status?.replicas ?? 0,
        message: ready?.message ?? 'waiting for the operator',
      };
      const seen = app.status?.observedGeneration ?? 0;
      if (seen < (applied.generation ?? 0) || (ready?.observedGeneration ?? 0) < (applied.generation ?? 0))
        return {
          phase: 'progressing',
          progress: { ...progress, message: 'waiting for the operator to see the new version' },
        };
      if (ready?.status === 'True') return { phase: 'ready', progress };
      if (ready?.status === 'False' && ready.reason && APP_START_FAILURE_REASONS.has(ready.reason))
        return { phase: 'failed', message: `${ready.reason}: ${ready.message ?? ''}`.trim(), progress };
      if (ready?.reason === AppReadyReason.ScaledToZero) return { phase: 'ready', progress };
      return { phase: 'progressing', progress };
    },

    async rollback(projectId, appName, applied) {
      const ns = await namespace(projectId);
      const previous = applied.previous as Previous | undefined;
      if (!previous) {
        // A new App that never served: it goes.
        await api.delete(ref(ns, appName) as never).catch((err: unknown) => {
          if (!isNotFound(err)) throw err;
        });
        return;
      }
      await apply({
        apiVersion: API_VERSION,
        kind: 'App',
        metadata: {
          name: appName,
          namespace: ns,
          ...(previous.buildId ? { annotations: { [BUILD_ID_ANNOTATION]: previous.buildId } } : {}),
        },
        spec: previous.spec,
      });
    },

    async list(projectId) {
      const ns = await deps.projects.namespaceOf(projectId);
      if (!ns) return [];
      const list = (await api.list(API_VERSION, 'App', ns)) as unknown as { items: App[] };
      return list.items
        .filter((a) => !a.metadata.deletionTimestamp)
        .map((a) => describe(projectId, a))
        .sort((a, b) => a.name.localeCompare(b.name));
    },

    async get(projectId, appName) {
      const ns = await deps.projects.namespaceOf(projectId);
      if (!ns) return undefined;
      const app = await read(ns, appName);
      return app && !app.metadata.deletionTimestamp ? describe(projectId, app) : undefined;
    },

    async delete(projectId, appName) {
      const ns = await deps.projects.namespaceOf(projectId);
      if (!ns) return false;
      try {
        await api.delete(ref(ns, appName) as never);
        return true;
      } catch (err) {
        if (isNotFound(err)) return false;
        throw err;
      }
    },
  };
}
