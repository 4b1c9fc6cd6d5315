/**
 * Deploys in a cluster: the management API accepts bundles and runs the build worker, which builds
 * dependency sets as Kubernetes Jobs and applies versions to App resources (src/builds/).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { JetStreamManager } from '@nats-io/jetstream';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import type { ArchiveLimits } from '../builds/archive.ts';
import { DEFAULT_BUNDLE_LIMITS } from '../builds/bundle.ts';
import { createDeployments } from '../builds/deployments.ts';
import { ensureBuildInfrastructure } from '../builds/infrastructure.ts';
import { createJobBuilder, DEFAULT_JOB_BUILDER_SETTINGS } from '../builds/job-builder.ts';
import { createKubeTarget } from '../builds/kube-target.ts';
import { createBuildLogs } from '../builds/logs.ts';
import { createBuildStore } from '../builds/records.ts';
import {
  type BuildWorker,
  createBuildWorker,
  DEFAULT_BUILD_WORKER_SETTINGS,
  enqueueBuild,
} from '../builds/worker.ts';
import { systemClock } from '../shared/clock.ts';
import { DEFAULT_PLATFORM_IMAGE, DEFAULT_RUNTIME_IMAGE } from '../shared/images.ts';
import type { ProjectNamespaces } from '../shared/kube/projects.ts';
import type { Logger } from '../shared/log.ts';
import type { Replicas } from '../shared/nats/jetstream.ts';
import { int, optionalText, text } from '../shared/settings.ts';
import type { DeployApi } from './deploy-api.ts';

/** Every deploy setting of the management API, with its default (docs/deploy.md, docs/management.md). */
export const DeployEnv = {
  APPHOST_RUNTIME_IMAGE: text(DEFAULT_RUNTIME_IMAGE),
  APPHOST_PLATFORM_IMAGE: text(DEFAULT_PLATFORM_IMAGE),
  APPHOST_BUILD_PYTHON_VERSION: text(DEFAULT_JOB_BUILDER_SETTINGS.pythonVersion),
  APPHOST_BUILD_PLATFORM: text(DEFAULT_JOB_BUILDER_SETTINGS.platform),
  APPHOST_BUILD_TIMEOUT_MS: int(DEFAULT_JOB_BUILDER_SETTINGS.buildTimeoutMs, { min: 10_000 }),
  APPHOST_BUILD_CPU: text(DEFAULT_JOB_BUILDER_SETTINGS.resources.cpu),
  APPHOST_BUILD_MEMORY: text(DEFAULT_JOB_BUILDER_SETTINGS.resources.memory),
  APPHOST_BUILD_JOB_TTL_SECONDS: int(DEFAULT_JOB_BUILDER_SETTINGS.jobTtlSeconds),
  APPHOST_BUILD_CONCURRENCY: int(DEFAULT_BUILD_WORKER_SETTINGS.concurrency, { min: 1 }),
  APPHOST_DEPLOY_ROLLOUT_TIMEOUT_MS: int(15 * 60_000, { min: 1_000 }),
  APPHOST_DEPLOY_API_URL: optionalText(),
  APPHOST_BUNDLE_MAX_BYTES: int(DEFAULT_BUNDLE_LIMITS.maxBytes, { min: 1_024 }),
  APPHOST_BUNDLE_MAX_UNPACKED_BYTES: int(DEFAULT_BUNDLE_LIMITS.maxUnpackedBytes, { min: 1_024 }),
  APPHOST_BUNDLE_MAX_FILES: int(DEFAULT_BUNDLE_LIMITS.maxFiles, { min: 1 }),
};
const DeployEnvSchema = z.object(DeployEnv);
export type DeployEnv = z.output<typeof DeployEnvSchema>;

/** A build interrupted this often (the management pod restarted) fails instead of starting again. */
export const CLUSTER_BUILD_MAX_ATTEMPTS = 3;

export interface ClusterDeploys {
  deploy: DeployApi;
  worker: BuildWorker;
}

export async function startClusterDeploys(deps: {
  kc: KubeConfig;
  nc: NatsConnection;
  jsm: JetStreamManager;
  replicas: Replicas;
  natsUrl: string;
  projects: ProjectNamespaces;
  cfg: DeployEnv;
  /** {api_url} as callers reach it, when known (for the run URL apps are shown with). */
  apiUrl: string | undefined;
  log: Logger;
}): Promise<ClusterDeploys> {
  const { cfg, log } = deps;
  const infra = await ensureBuildInfrastructure(deps.nc, deps.jsm, deps.replicas, log);
  const builds = createBuildStore(infra.kv);
  const logs = createBuildLogs(jetstream(deps.nc));
  const target = createKubeTarget({ kc: deps.kc, projects: deps.projects });
  const builder = createJobBuilder({
    kc: deps.kc,
    projects: deps.projects,
    store: infra.artifacts,
    clock: systemClock,
    settings: {
      ...DEFAULT_JOB_BUILDER_SETTINGS,
      runtimeImage: cfg.APPHOST_RUNTIME_IMAGE,
      platformImage: cfg.APPHOST_PLATFORM_IMAGE,
      natsUrl: deps.natsUrl,
      pythonVersion: cfg.APPHOST_BUILD_PYTHON_VERSION,
      platform: cfg.APPHOST_BUILD_PLATFORM,
      buildTimeoutMs: cfg.APPHOST_BUILD_TIMEOUT_MS,
      jobTtlSeconds: cfg.APPHOST_BUILD_JOB_TTL_SECONDS,
      resources: { cpu: cfg.APPHOST_BUILD_CPU, memory: cfg.APPHOST_BUILD_MEMORY },
    },
  });
  const bundleLimits: ArchiveLimits = {
    maxBytes: cfg.APPHOST_BUNDLE_MAX_BYTES,
    maxUnpackedBytes: cfg.APPHOST_BUNDLE_MAX_UNPACKED_BYTES,
    maxFiles: cfg.APPHOST_BUNDLE_MAX_FILES,
  };
  const deployments = createDeployments({
    builds,
    logs,
    artifacts: infra.artifacts,
    builder,
    target,
    enqueue: (job) => enqueueBuild(deps.nc, job),
    clock: systemClock,
    log: log.child({ component: 'builds' }),
    settings: {
      bundleLimits,
      rolloutTimeoutMs: cfg.APPHOST_DEPLOY_ROLLOUT_TIMEOUT_MS,
      rolloutPollMs: 2_000,
      maxAttempts: CLUSTER_BUILD_MAX_ATTEMPTS,
    },
  });
  const worker = createBuildWorker({
    nc: deps.nc,
    deployments,
    log: log.child({ component: 'build-worker' }),
    // A build is watched for up to its Job's bound plus the rollout's: heartbeats keep it ours.
    settings: { concurrency: cfg.APPHOST_BUILD_CONCURRENCY },
  });
  await worker.start();
  return {
    deploy: {
      deployments,
      builds,
      logs,
      target,
      ...(deps.apiUrl ? { apiUrl: deps.apiUrl.replace(/\/+$/, '') } : {}),
    },
    worker,
  };
}
