/**
 * What crosses NATS for deploys: the build queue, build records and build logs (management API, build
 * worker, CLI through the API). Changing a shape here is changing a wire format: bump `v`.
 */
import type { AppConfig } from '../../apis/v1alpha1/app-config.ts';
import type { Sha256Digest } from '../../apis/v1alpha1/types.ts';

/** Work queue of accepted deploys, one message per build (`Nats-Msg-Id` = build id). */
export const BUILDS_STREAM = 'BUILDS';
/** One subject per build; each message is one line of its log, the last one carries `BUILD_LOG_END_HEADER`. */
export const BUILD_LOGS_STREAM = 'BUILD_LOGS';
/** KV bucket of build records (`buildKey()`) and each app's newest build (`latestBuildKey()`). */
export const BUILDS_BUCKET = 'apphost_builds';
export const BUILD_LOG_END_HEADER = 'Apphost-Build-Log-End';
/** Object Store bucket of bundles and dependency sets, each object named `sha256:<hex>`. */
export const ARTIFACTS_BUCKET = 'apphost_artifacts';
/** KV bucket: dependency key → digest of the dependency set built for it. */
export const DEPENDENCY_SETS_BUCKET = 'apphost_dependency_sets';

export const buildSubject = (projectId: string, appName: string) => `apphost.builds.${projectId}.${appName}`;
export const buildLogSubject = (projectId: string, appName: string, buildId: string) =>
  `apphost.buildlogs.${projectId}.${appName}.${buildId}`;
export const buildKey = (projectId: string, appName: string, buildId: string) =>
  `${projectId}.${appName}.${buildId}`;
export const latestBuildKey = (projectId: string, appName: string) => `latest.${projectId}.${appName}`;

export interface BuildJob {
  v: 1;
  buildId: string;
  projectId: string;
  appName: string;
}

export const BuildState = {
  /** Accepted; waiting for a build worker. */
  Queued: 'queued',
  /** Installing the dependencies (or finding them in the cache). */
  Building: 'building',
  /** The new version is applied; waiting until it serves. */
  Deploying: 'deploying',
  /** The new version serves every call. */
  Ready: 'ready',
  /** Not deployed; the version that served before still does. */
  Failed: 'failed',
} as const;
export type BuildState = (typeof BuildState)[keyof typeof BuildState];
export const TERMINAL_BUILD_STATES: readonly BuildState[] = ['ready', 'failed'];

export const BuildErrorCode = {
  PipFailed: 'pip_failed',
  BuildTimeout: 'build_timeout',
  DependenciesTooLarge: 'dependencies_too_large',
  RolloutFailed: 'rollout_failed',
  RolloutTimeout: 'rollout_timeout',
  Superseded: 'superseded',
  Deleted: 'app_deleted',
  Unavailable: 'python_version_unavailable',
  Internal: 'internal',
} as const;
export type BuildErrorCode = (typeof BuildErrorCode)[keyof typeof BuildErrorCode];

export interface RolloutProgress {
  ready: number;
  desired: number;
  message: string;
}

export interface BuildRecord {
  buildId: string;
  projectId: string;
  appName: string;
  state: BuildState;
  /** The app's apphost.toml as deployed. */
  config: AppConfig;
  bundle: Sha256Digest;
  bundleBytes: number;
  files: number;
  /** What pip installs (absent: no dependencies) and where its relative options start. */
  requirements?: { text: string; dir: string; localPaths: string[] };
  dependencyKey?: string;
  dependencies?: Sha256Digest;
  /** The dependency set came from the cache: no pip run. */
  dependenciesCached?: boolean;
  /** What the apply did (kept so a restarted worker keeps watching, or rolls back). */
  applied?: { buildId: string; generation?: number; previous?: unknown };
  rollout?: RolloutProgress;
  /** Set when a failed rollout put the previous version back. */
  rolledBack?: boolean;
  error?: { code: BuildErrorCode; message: string };
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  /** Deliveries of the build job that started work (above 1 after a worker restart). */
  attempts: number;
}
