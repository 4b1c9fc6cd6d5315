/**
 * Deploys: accept a bundle (checked completely before anything is stored), then — in the build worker —
 * find or build its dependency set, apply the new version and watch it until it serves or fails.
 * A version that fails to build is never applied; one that fails to roll out is rolled back, so the
 * version that served before keeps serving either way. The newest deploy of an app wins: an older one
 * that finishes its build later is not applied over it.
 */
import { randomBytes } from 'node:crypto';
import { APP_CONFIG_FILE, type ConfigProblem } from '../apis/v1alpha1/app-config.ts';
import type { Clock } from '../shared/clock.ts';
import {
  type BuildErrorCode,
  type BuildJob,
  type BuildRecord,
  BuildState,
  BuildErrorCode as Code,
  type RolloutProgress,
} from '../shared/contracts/builds.ts';
import type { Logger } from '../shared/log.ts';
import type { AppliedVersion, AppTarget } from './app-target.ts';
import type { ArchiveLimits } from './archive.ts';
import type { ArtifactStore } from './artifact-store.ts';
import { BuildFailure, type DependencyBuilder } from './builder.ts';
import { BundleError, BundleProblem, inspectBundle } from './bundle.ts';
import type { BuildLogs, BuildLogWriter } from './logs.ts';
import { type BuildStore, isTerminalBuild } from './records.ts';
import { dependencyKey } from './requirements.ts';

export interface DeploymentSettings {
  bundleLimits: ArchiveLimits;
  /** Bound on a new version becoming ready once applied; past it, the deploy fails and is rolled back. */
  rolloutTimeoutMs: number;
  /** How often a rolling-out version is looked at. */
  rolloutPollMs: number;
  /** A build interrupted this many times (its worker restarted) fails instead of starting again. */
  maxAttempts: number;
}

export interface DeploymentsDeps {
  builds: BuildStore;
  logs: BuildLogs;
  artifacts: ArtifactStore;
  builder: DependencyBuilder;
  target: AppTarget;
  /** Queues a build job (JetStream, `Nats-Msg-Id` = build id). */
  enqueue(job: BuildJob): Promise<void>;
  clock: Clock;
  log: Logger;
  settings: DeploymentSettings;
  newBuildId?: () => string;
}

export interface Deployments {
  /** Bounds of a bundle (the compressed one is also the upload's). */
  readonly bundleLimits: ArchiveLimits;
  /** Checks and stores a bundle and queues its build. Throws BundleError (the caller's 400). */
  submit(projectId: string, data: Buffer): Promise<BuildRecord>;
  /** Carries one build through; `heartbeat` is called while it works (keeps the job from redelivery). */
  run(job: BuildJob, heartbeat: () => void, signal: AbortSignal): Promise<void>;
}

/** Sortable by time, lowercase letters and digits: fits Kubernetes names and NATS subject tokens. */
export function newBuildId(now = Date.now()): string {
  return `${now.toString(36)}${randomBytes(4).toString('hex')}`;
}

const configError = (problems: ConfigProblem[]) =>
  new BundleError(
    BundleProblem.InvalidConfig,
    `${APP_CONFIG_FILE}: ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`,
    APP_CONFIG_FILE,
    problems,
  );

export function createDeployments(deps: DeploymentsDeps): Deployments {
  const { builds, logs, artifacts, builder, target, clock, settings } = deps;
  const iso = () => new Date(clock.now()).toISOString();
  const mkId = deps.newBuildId ?? (() => newBuildId(clock.now()));

  const fail = (r: BuildRecord, code: BuildErrorCode, message: string, extra: Partial<BuildRecord> = {}) =>
    builds.update(r.projectId, r.appName, r.buildId, (cur) =>
      isTerminalBuild(cur)
        ? undefined
        : { ...cur, ...extra, state: BuildState.Failed, error: { code, message }, finishedAt: iso() },
    );

  return {
    bundleLimits: settings.bundleLimits,

    async submit(projectId, data) {
      const b = await inspectBundle(data, settings.bundleLimits);
      const problems = target.check(b.config);
      const wanted = b.config.app.python_version;
      const hasDeps = b.requirements.text.trim() !== '';
      // Only a Python version or requirements need the builder's target (local mode asks the Python).
      const buildTarget = wanted || hasDeps ? await builder.target() : undefined;
      if (wanted && buildTarget && wanted !== buildTarget.pythonVersion)
        problems.push({
          path: 'app.python_version',
          message: `Python ${wanted} is not available here (this platform runs Python ${buildTarget.pythonVersion})`,
        });
      if (problems.length) throw configError(problems);
      const reqDir = b.config.app.dependencies?.requirements?.split('/').slice(0, -1).join('/') ?? '';
      await artifacts.put(b.digest, data);
      const record: BuildRecord = {
        buildId: mkId(),
        projectId,
        appName: b.config.app.name,
        state: BuildState.Queued,
        config: b.config,
        bundle: b.digest,
        bundleBytes: data.length,
        files: b.files,
        ...(hasDeps && buildTarget
          ? {
              requirements: { text: b.requirements.text, dir: reqDir, localPaths: b.requirements.localPaths },
              dependencyKey: dependencyKey(buildTarget, b.requirements, b.fileDigests),
            }
          : {}),
        createdAt: iso(),
        attempts: 0,
      };
      await builds.create(record);
      try {
        await deps.enqueue({ v: 1, buildId: record.buildId, projectId, appName: record.appName });
      } catch (err) {
        await fail(record, Code.Internal, `the build could not be queued: ${(err as Error).message}`);
        throw err;
      }
      return record;
    },

    async run(job, heartbeat, signal) {
      const rec = await builds.get(job.projectId, job.appName, job.buildId);
      if (!rec || isTerminalBuild(rec)) return;
      const log = logs.writer(rec.projectId, rec.appName, rec.buildId);
      const jobLog = deps.log.child({ buildId: rec.buildId, project: rec.projectId, app: rec.appName });
      const beat = setInterval(heartbeat, 5_000);
      try {
        await carry(rec, log, jobLog, signal);
      } finally {
        clearInterval(beat);
        await log.end();
      }
    },
  };

  async function carry(
    first: BuildRecord,
    log: BuildLogWriter,
    jobLog: Logger,
    signal: AbortSignal,
  ): Promise<void> {
    let rec =
      (await builds.update(first.projectId, first.appName, first.buildId, (cur) =>
        isTerminalBuild(cur)
          ? undefined
          : {
              ...cur,
              state: cur.state === BuildState.Queued ? BuildState.Building : cur.state,
              startedAt: cur.startedAt ?? iso(),
              attempts: cur.attempts + 1,
            },
      )) ?? first;
    if (isTerminalBuild(rec)) return;
    if (rec.attempts > settings.maxAttempts) {
      const msg = `the build was interrupted ${rec.attempts - 1} times (platform restarts); not trying again`;
      log.line(msg);
      if (rec.applied) await target.rollback(rec.projectId, rec.appName, rec.applied);
      await fail(rec, Code.Internal, msg, rec.applied ? { rolledBack: true } : {});
      return;
    }
    if (rec.attempts > 1) log.line(`resuming after a restart (attempt ${rec.attempts})`);
    jobLog.info({ attempt: rec.attempts }, 'build started');

    // 1. Dependencies: from the cache, or built now.
    if (rec.state === BuildState.Building && rec.requirements && rec.dependencyKey && !rec.dependencies) {
      const cached = await artifacts.dependencySet(rec.dependencyKey);
      if (cached) {
        log.line(`dependencies: reusing the set built before for the same requirements (${cached})`);
        rec =
          (await builds.update(rec.projectId, rec.appName, rec.buildId, (c) => ({
            ...c,
            dependencies: cached,
            dependenciesCached: true,
          }))) ?? rec;
      } else {
        log.line("dependencies: pip install --target, with the runtime's packages as constraints");
        const result = await builder.build(
          {
            buildId: rec.buildId,
            projectId: rec.projectId,
            appName: rec.appName,
            bundle: rec.bundle,
            requirements: { text: rec.requirements.text, localPaths: rec.requirements.localPaths },
            requirementsDir: rec.requirements.dir,
            key: rec.dependencyKey,
          },
          (line) => log.line(line),
          signal,
        );
        if (!result.ok) {
          if (signal.aborted) throw new Error('stopped');
          const code =
            result.failure === BuildFailure.PipFailed
              ? Code.PipFailed
              : result.failure === BuildFailure.Timeout
                ? Code.BuildTimeout
                : result.failure === BuildFailure.TooLarge
                  ? Code.DependenciesTooLarge
                  : Code.Internal;
          log.line(`build failed: ${result.message}`);
          log.line('the version that served before keeps serving');
          await fail(rec, code, result.message);
          jobLog.info({ code }, 'build failed');
          return;
        }
        rec =
          (await builds.update(rec.projectId, rec.appName, rec.buildId, (c) => ({
            ...c,
            dependencies: result.digest,
            dependenciesCached: false,
          }))) ?? rec;
      }
    }

    // 2. Apply, unless a newer deploy of the app came in meanwhile.
    let applied: AppliedVersion | undefined = rec.applied;
    if (!applied) {
      const latest = await builds.latest(rec.projectId, rec.appName);
      if (latest && latest !== rec.buildId) {
        const msg = `a newer deploy of ${rec.appName} (build ${latest}) came in; this one is not applied`;
        log.line(msg);
        await fail(rec, Code.Superseded, msg);
        return;
      }
      applied = await target.apply(rec.projectId, {
        buildId: rec.buildId,
        config: rec.config,
        artifacts: { bundle: rec.bundle, ...(rec.dependencies ? { dependencies: rec.dependencies } : {}) },
      });
      const saved = applied;
      rec =
        (await builds.update(
          rec.projectId,
          rec.appName,
          rec.buildId,
          (c) =>
            ({
              ...c,
              state: BuildState.Deploying,
              applied: saved,
            }) as BuildRecord,
        )) ?? rec;
      log.line(
        saved.previous
          ? 'rolling out: the new version starts beside the old one, which serves until the new one is ready'
          : 'rolling out: the first version of the app starts',
      );
    }

    // 3. Watch the rollout until it serves, fails or runs out of time.
    const deadline = clock.now() + settings.rolloutTimeoutMs;
    let last = '';
    for (;;) {
      if (signal.aborted) throw new Error('stopped');
      const st = await target.rollout(rec.projectId, rec.appName, applied);
      if (st.phase === 'gone') {
        await fail(rec, Code.Deleted, `${rec.appName} was deleted while it rolled out`);
        log.line('the app was deleted');
        return;
      }
      if ('progress' in st && st.progress) {
        const p: RolloutProgress = st.progress;
        if (p.message !== last) {
          last = p.message;
          log.line(`rollout: ${p.message}`);
          await builds.update(rec.projectId, rec.appName, rec.buildId, (c) => ({ ...c, rollout: p }));
        }
      }
      if (st.phase === 'ready') {
        await builds.update(rec.projectId, rec.appName, rec.buildId, (c) =>
          isTerminalBuild(c) ? undefined : { ...c, state: BuildState.Ready, finishedAt: iso() },
        );
        log.line(`ready: ${rec.appName} serves build ${rec.buildId}`);
        jobLog.info('deploy ready');
        return;
      }
      const timedOut = clock.now() >= deadline;
      if (st.phase === 'failed' || timedOut) {
        // A newer deploy took over while this one rolled out: it is that one's rollout now.
        const latest = await builds.latest(rec.projectId, rec.appName);
        if (latest && latest !== rec.buildId) {
          const msg = `a newer deploy of ${rec.appName} (build ${latest}) replaced this one while it rolled out`;
          log.line(msg);
          await fail(rec, Code.Superseded, msg);
          return;
        }
        const code = st.phase === 'failed' ? Code.RolloutFailed : Code.RolloutTimeout;
        const message =
          st.phase === 'failed'
            ? `the new version did not start: ${st.message}`
            : `the new version was not ready within ${Math.round(settings.rolloutTimeoutMs / 1000)} s`;
        log.line(message);
        await target.rollback(rec.projectId, rec.appName, applied);
        log.line(
          applied.previous
            ? 'rolled back: the version that served before keeps serving'
            : 'removed: the app had no earlier version',
        );
        await fail(rec, code, message, { rolledBack: true });
        jobLog.info({ code }, 'deploy failed; rolled back');
        return;
      }
      await clock.sleep(settings.rolloutPollMs, signal).catch(() => undefined);
    }
  }
}
