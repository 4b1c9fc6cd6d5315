/**
 * Deploys in apphost dev: the same pipeline as a cluster (bundle → dependency build → rollout, with build
 * records and logs in NATS), with a pip subprocess as the builder and local processes as the target.
 * The apps folder goes through it too: each app folder is deployed at start and again when it changes.
 */
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { stringify as toToml } from 'smol-toml';
import type { AppSpec } from '../apis/v1alpha1/types.ts';
import type { AppTarget } from '../builds/app-target.ts';
import type { ArchiveLimits } from '../builds/archive.ts';
import { DEFAULT_BUNDLE_LIMITS, packBundle } from '../builds/bundle.ts';
import { createDeployments, type Deployments } from '../builds/deployments.ts';
import { ensureBuildInfrastructure } from '../builds/infrastructure.ts';
import { createLocalBuilder } from '../builds/local-builder.ts';
import { type BuildLogs, createBuildLogs } from '../builds/logs.ts';
import { type BuildStore, createBuildStore, isTerminalBuild } from '../builds/records.ts';
import { createBuildWorker, enqueueBuild } from '../builds/worker.ts';
import { type Clock, systemClock } from '../shared/clock.ts';
import type { BuildRecord } from '../shared/contracts/builds.ts';
import type { Logger } from '../shared/log.ts';
import { resolveReplicas } from '../shared/nats/replicas.ts';
import { type AppHost, createAppHost } from './app-host.ts';
import type { LocalApp } from './app-manifests.ts';
import { createLocalTarget } from './deployed-apps.ts';
import type { Supervisor } from './supervisor.ts';

/** Bound on a deployed version becoming ready in local mode (then it is stopped and reported). */
export const LOCAL_ROLLOUT_TIMEOUT_MS = 120_000;
/** Bound on connecting to NATS for deploys at start. */
export const LOCAL_DEPLOY_NATS_TIMEOUT_MS = 20_000;
/** Bound on builds still running when apphost dev stops (they are resumed by the next session). */
export const LOCAL_BUILD_STOP_BOUND_MS = 5_000;

export interface LocalDeploys {
  host: AppHost;
  target: AppTarget;
  deployments: Deployments;
  builds: BuildStore;
  logs: BuildLogs;
  /** Packs an app folder and deploys it; the build record (queued). */
  deployFolder(app: LocalApp): Promise<BuildRecord>;
  /** Waits until the builds are final or the bound passes; the records as they are then. */
  settle(records: BuildRecord[], timeoutMs: number): Promise<BuildRecord[]>;
  stop(): Promise<void>;
}

export interface LocalDeploysDeps {
  natsUrl: string;
  projectId: string;
  python: string;
  env: NodeJS.ProcessEnv;
  stateDir: string;
  supervisor: Supervisor;
  log: Logger;
  /** Build log lines, printed with the app's prefix. */
  output: (line: string) => void;
  /** An app was deployed (or its new version applied) with this spec. */
  onAppAdded(name: string, spec: AppSpec): void;
  onAppRemoved(name: string): void;
  clock?: Clock;
  /** Bounds of a bundle (default DEFAULT_BUNDLE_LIMITS). */
  bundleLimits?: ArchiveLimits;
}

export async function startLocalDeploys(deps: LocalDeploysDeps): Promise<LocalDeploys> {
  const clock = deps.clock ?? systemClock;
  const nc: NatsConnection = await connect({
    servers: deps.natsUrl,
    name: 'apphost-dev-builds',
    maxReconnectAttempts: -1,
    timeout: LOCAL_DEPLOY_NATS_TIMEOUT_MS,
  });
  try {
    const jsm = await jetstreamManager(nc, { timeout: LOCAL_DEPLOY_NATS_TIMEOUT_MS });
    const infra = await ensureBuildInfrastructure(nc, jsm, resolveReplicas('auto', nc), deps.log);
    const builds = createBuildStore(infra.kv);
    const natsLogs = createBuildLogs(jetstream(nc));
    // Build logs also go to the terminal, as the app's output does.
    const logs: BuildLogs = {
      ...natsLogs,
      writer(projectId, appName, buildId) {
        const w = natsLogs.writer(projectId, appName, buildId);
        return {
          line(text) {
            deps.output(`[${appName}] [build ${buildId}] ${text}`);
            w.line(text);
          },
          end: () => w.end(),
        };
      },
    };
    const cacheDir = join(deps.stateDir, 'artifacts');
    const builder = createLocalBuilder({
      python: deps.python,
      store: infra.artifacts,
      workDir: join(deps.stateDir, 'builds'),
      cacheDir,
      env: deps.env,
    });
    const host = createAppHost({
      supervisor: deps.supervisor,
      python: deps.python,
      env: deps.env,
      log: deps.log,
      settings: { readyTimeoutMs: LOCAL_ROLLOUT_TIMEOUT_MS },
      terminationDir: join(deps.stateDir, 'termination'),
    });
    const target = createLocalTarget({
      projectId: deps.projectId,
      host,
      artifacts: infra.artifacts,
      cacheDir,
      log: deps.log,
      onAppAdded: deps.onAppAdded,
      onAppRemoved: deps.onAppRemoved,
      // Ready as in a cluster: a serving version with a ready replica, or scaled to zero (the next call starts one).
      isReady: async (name) => {
        const ep = host.endpoint(name);
        const counts = host.replicaCounts(name);
        if (!ep || ep.starting || !counts) return false;
        return counts.ready > 0 || counts.desired === 0;
      },
    });
    const deployments = createDeployments({
      builds,
      logs,
      artifacts: infra.artifacts,
      builder,
      target,
      enqueue: (job) => enqueueBuild(nc, job),
      clock,
      log: deps.log.child({ component: 'builds' }),
      settings: {
        bundleLimits: deps.bundleLimits ?? DEFAULT_BUNDLE_LIMITS,
        // The app host bounds a version's start; this only has to outlast it.
        rolloutTimeoutMs: LOCAL_ROLLOUT_TIMEOUT_MS + 10_000,
        rolloutPollMs: 100,
        maxAttempts: 3,
      },
    });
    const worker = createBuildWorker({
      nc,
      deployments,
      log: deps.log.child({ component: 'build-worker' }),
      // Only this project's builds: another apphost dev on the same NATS has its own apps.
      settings: {
        concurrency: 2,
        consumerName: `apphost-builds-${deps.projectId}`,
        subjects: `apphost.builds.${deps.projectId}.>`,
      },
    });
    await worker.start();

    return {
      host,
      target,
      deployments,
      builds,
      logs,
      async deployFolder(app) {
        // An older folder with only app.yaml gets its settings bundled as apphost.toml.
        const packed = await packBundle(app.dir, app.config, DEFAULT_BUNDLE_LIMITS, toToml(app.config));
        return deployments.submit(deps.projectId, packed.data);
      },
      async settle(records, timeoutMs) {
        const deadline = clock.now() + timeoutMs;
        let current = records;
        for (;;) {
          current = await Promise.all(
            current.map(async (r) => (await builds.get(r.projectId, r.appName, r.buildId)) ?? r),
          );
          if (current.every(isTerminalBuild) || clock.now() >= deadline) return current;
          await clock.sleep(100);
        }
      },
      async stop() {
        await worker.stop(LOCAL_BUILD_STOP_BOUND_MS);
        await nc.drain().catch(() => undefined);
      },
    };
  } catch (err) {
    await nc.close();
    throw err;
  }
}
