/**
 * The AppTarget of apphost dev: a deployed version's bundle and dependency set are unpacked (verified)
 * into the local artifact cache, and the app host rolls it out as the app's next process.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  APP_CONFIG_FILE,
  type AppConfig,
  type ConfigProblem,
  customRuntimeOf,
} from '../apis/v1alpha1/app-config.ts';
import { appFromConfig } from '../apis/v1alpha1/app-config-mapping.ts';
import { type AppSpec, DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS } from '../apis/v1alpha1/types.ts';
import type {
  AppliedVersion,
  AppTarget,
  AppVersion,
  DeployedApp,
  RolloutStatus,
} from '../builds/app-target.ts';
import type { ArtifactStore } from '../builds/artifact-store.ts';
import { artifactDir, materialize } from '../builds/local-builder.ts';
import type { Logger } from '../shared/log.ts';
import type { AppHost, RolloutResult } from './app-host.ts';
import type { LocalApp } from './app-manifests.ts';

export interface LocalTargetDeps {
  projectId: string;
  host: AppHost;
  artifacts: ArtifactStore;
  /** Unpacked bundles and dependency sets, one folder per digest. */
  cacheDir: string;
  log: Logger;
  /** Tells the management store an app exists, with its spec (so domains can be assigned to it), or no longer does. */
  onAppAdded(name: string, spec: AppSpec): void;
  onAppRemoved(name: string): void;
  /** Whether the app's current process answers its readiness probe. */
  isReady(name: string): Promise<boolean>;
}

type Progress = { state: 'starting' } | { state: 'done'; result: RolloutResult };

export function createLocalTarget(
  deps: LocalTargetDeps,
): AppTarget & { localApp(version: AppVersion): Promise<LocalApp> } {
  const rollouts = new Map<string, Progress>();
  const created = new Map<string, string>();

  const localApp = async (version: AppVersion): Promise<LocalApp> => {
    const dir = await materialize(deps.artifacts, version.artifacts.bundle, deps.cacheDir);
    const depsDir = version.artifacts.dependencies
      ? await materialize(deps.artifacts, version.artifacts.dependencies, deps.cacheDir)
      : undefined;
    const manifest = appFromConfig(version.config, { artifacts: version.artifacts });
    return {
      name: version.config.app.name,
      dir,
      file: join(dir, APP_CONFIG_FILE),
      config: version.config,
      manifest,
      gracePeriodSeconds: manifest.spec.responseGracePeriodSeconds ?? DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS,
      ...(depsDir ? { depsDir } : {}),
    };
  };

  const forget = async (bundle: string) => {
    if (deps.host.names().some((n) => deps.host.current(n)?.meta.bundle === bundle)) return;
    await rm(artifactDir(deps.cacheDir, bundle), { recursive: true, force: true }).catch(() => undefined);
  };

  const describe = (projectId: string, name: string, ready: boolean): DeployedApp | undefined => {
    const v = deps.host.current(name);
    const ep = deps.host.endpoint(name);
    if (!ep) return undefined;
    const config: AppConfig = v?.app.config ?? { app: { name } };
    return {
      projectId,
      name,
      runtime: v?.app.manifest.spec.runtime ?? 'cortex',
      ...(v?.meta.buildId ? { buildId: v.meta.buildId } : {}),
      ...(v?.meta.bundle ? { bundle: v.meta.bundle } : {}),
      ...(v?.meta.dependencies ? { dependencies: v.meta.dependencies } : {}),
      ready,
      readyReplicas: deps.host.replicaCounts(name)?.ready ?? (ready ? 1 : 0),
      desiredReplicas: deps.host.replicaCounts(name)?.desired ?? 1,
      ...(ready ? {} : { message: v ? 'its process is not ready' : 'its first version is starting' }),
      ...(created.get(name) ? { createdAt: created.get(name) } : {}),
      config,
    };
  };

  return {
    localApp,

    check(config) {
      const problems: ConfigProblem[] = [];
      const custom = customRuntimeOf(config);
      if (custom && !custom.entrypoint)
        problems.push({
          path: 'app.runtime.custom.entrypoint',
          message: 'is required in local mode (the command that starts your server)',
        });
      return problems;
    },

    async apply(_projectId, version) {
      const app = await localApp(version);
      const previous = deps.host.current(app.name)?.meta.buildId;
      if (!deps.host.endpoint(app.name)) {
        deps.host.reserve(app);
        created.set(app.name, new Date().toISOString());
        deps.onAppAdded(app.name, app.manifest.spec);
      }
      rollouts.set(version.buildId, { state: 'starting' });
      const replaced = deps.host.current(app.name);
      const before = replaced?.meta.bundle;
      // After the old process had its drain (grace period) and more.
      const forgetAfterMs = (replaced?.app.gracePeriodSeconds ?? 0) * 1000 + 10_000;
      void deps.host
        .rollout(app, { buildId: version.buildId, ...version.artifacts })
        .then((result) => {
          rollouts.set(version.buildId, { state: 'done', result });
          if (result.ok) deps.onAppAdded(app.name, app.manifest.spec);
          // The replaced version's unpacked files go once no app runs them (dependency sets stay: a cache).
          if (result.ok && before && before !== version.artifacts.bundle)
            setTimeout(() => void forget(before), forgetAfterMs).unref();
        })
        .catch((err: unknown) =>
          rollouts.set(version.buildId, {
            state: 'done',
            result: { ok: false, message: (err as Error).message },
          }),
        );
      return { buildId: version.buildId, ...(previous ? { previous } : {}) };
    },

    async rollout(_projectId, appName, applied: AppliedVersion): Promise<RolloutStatus> {
      if (!deps.host.endpoint(appName)) return { phase: 'gone' };
      const p = rollouts.get(applied.buildId);
      if (!p) return { phase: 'failed', message: 'apphost dev restarted while the version was starting' };
      if (p.state === 'starting')
        return {
          phase: 'progressing',
          progress: { ready: 0, desired: 1, message: 'the new process is starting' },
        };
      rollouts.delete(applied.buildId);
      return p.result.ok
        ? { phase: 'ready', progress: { ready: 1, desired: 1, message: 'the new process serves' } }
        : { phase: 'failed', message: p.result.message };
    },

    async rollback(projectId, appName, applied) {
      // A failed local version never served and the old process was kept; one still starting is stopped.
      await deps.host.abandon(appName, applied.buildId);
      rollouts.delete(applied.buildId);
      // An app that never had a serving version goes.
      if (!deps.host.current(appName)) await this.delete(projectId, appName);
    },

    async list(projectId) {
      const out: DeployedApp[] = [];
      for (const name of deps.host.names().sort()) {
        const d = describe(projectId, name, await deps.isReady(name));
        if (d) out.push(d);
      }
      return out;
    },

    async get(projectId, appName) {
      if (!deps.host.endpoint(appName)) return undefined;
      return describe(projectId, appName, await deps.isReady(appName));
    },

    async delete(_projectId, appName) {
      const removed = await deps.host.remove(appName);
      if (removed) {
        created.delete(appName);
        deps.onAppRemoved(appName);
      }
      return removed;
    },
  };
}
