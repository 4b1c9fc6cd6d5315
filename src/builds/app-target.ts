/**
 * Where deployed versions go and how their rollout is seen: the App resource in a cluster
 * (kube-target.ts), local processes in apphost dev (src/local/deployed-apps.ts).
 */
import type { AppConfig, ConfigProblem } from '../apis/v1alpha1/app-config.ts';
import type { Sha256Digest } from '../apis/v1alpha1/types.ts';
import type { RolloutProgress } from '../shared/contracts/builds.ts';

export interface AppVersion {
  buildId: string;
  config: AppConfig;
  artifacts: { bundle: Sha256Digest; dependencies?: Sha256Digest };
}

/** What `apply` did, kept in the build record (JSON) so a restarted worker can keep watching or roll back. */
export interface AppliedVersion {
  buildId: string;
  /** The App's metadata.generation after the apply (cluster). */
  generation?: number;
  /** The version that served before, to put back when this one fails (absent: the app is new). */
  previous?: unknown;
}

export type RolloutStatus =
  | { phase: 'progressing'; progress: RolloutProgress }
  | { phase: 'ready'; progress: RolloutProgress }
  | { phase: 'failed'; message: string; progress?: RolloutProgress }
  /** The app was deleted while its version rolled out. */
  | { phase: 'gone' };

export interface DeployedApp {
  projectId: string;
  name: string;
  runtime: 'cortex' | 'custom';
  /** The deployed version, when it came from `apphost deploy`. */
  buildId?: string;
  bundle?: Sha256Digest;
  dependencies?: Sha256Digest;
  ready: boolean;
  readyReplicas: number;
  desiredReplicas: number;
  /** Why it is not ready, in words. */
  message?: string;
  createdAt?: string;
  /** The apphost.toml the App corresponds to. */
  config: AppConfig;
}

export interface AppTarget {
  /** Problems that stop this config from running here (e.g. a custom runtime without an image on a cluster). */
  check(config: AppConfig): ConfigProblem[];
  apply(projectId: string, version: AppVersion): Promise<AppliedVersion>;
  rollout(projectId: string, appName: string, applied: AppliedVersion): Promise<RolloutStatus>;
  /** Puts `applied.previous` back (removes the app when it was new). */
  rollback(projectId: string, appName: string, applied: AppliedVersion): Promise<void>;
  list(projectId: string): Promise<DeployedApp[]>;
  get(projectId: string, appName: string): Promise<DeployedApp | undefined>;
  /** false when there was no such app. */
  delete(projectId: string, appName: string): Promise<boolean>;
}
