/** Shared set-up for the gateway and run-worker integration tests: a real runtime, real NATS, real HTTP. */

import { mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import type { BalancerSettings } from '../../../src/gateway/balancer/balancer.ts';
import { balancerSettings, parseGatewayEnv } from '../../../src/gateway/config.ts';
import { balancerFrame, dataPlaneConfig, gatewayFrame } from '../../../src/gateway/dataplane/config-frame.ts';
import { createStateFeed } from '../../../src/gateway/dataplane/feed.ts';
import { listenOnSocketFile, serveHandoff } from '../../../src/gateway/dataplane/handoff.ts';
import { HANDED_SOCKET_NAME, recordsTo } from '../../../src/gateway/dataplane/native.ts';
import { procUsage } from '../../../src/gateway/dataplane/proc-usage.ts';
import type { ConfigMessage } from '../../../src/gateway/dataplane/protocol.ts';
import { spawnDataPlane, superviseDataPlane } from '../../../src/gateway/dataplane/supervise.ts';
import { createPublicServer } from '../../../src/gateway/public-server.ts';
import type { GatewaySettings } from '../../../src/gateway/settings.ts';
import { cachedRunTokenVerifier, type RememberedToken } from '../../../src/gateway/token-cache.ts';
import type { SyncCall } from '../../../src/runs/sync-calls.ts';
import type { AppLoad } from '../../../src/shared/contracts/scaling.ts';
import type {
  AppResolver,
  AppSink,
  MaybePromise,
  ReplicaSink,
  ResolvedApp,
  StartFailure,
} from '../../../src/shared/contracts/seams.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import type { RunTokenClaims, RunTokenVerifier } from '../../../src/shared/run-tokens.ts';
import { freePort, type ManagedProcess, startProcess, waitFor } from '../../harness/process.ts';
import { buildDataPlane } from './dataplane-binary.ts';

const here = dirname(fileURLToPath(import.meta.url));
export const FIXTURE_APP_DIR = join(here, 'fixtures', 'app');
export const REPO_ROOT = join(here, '..', '..', '..');
export const PYTHON = join(REPO_ROOT, 'runtime', 'python', '.venv', 'bin', 'python');
export const RUNTIME_START_TIMEOUT_MS = 60_000;

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface Runtime {
  url: string;
  port: number;
  proc: ManagedProcess;
}

/** The real Cortex runtime serving `appDir` on a free loopback port (`args`: more runtime flags). */
export async function startRuntime(appDir = FIXTURE_APP_DIR, args: string[] = []): Promise<Runtime> {
  const port = await freePort();
  const logDir = tempDir('apphost-rt-');
  const proc = startProcess(
    'runtime',
    PYTHON,
    ['-m', 'apphost_runtime', '--app-dir', appDir, '--port', String(port), '--host', '127.0.0.1', ...args],
    { logFile: join(logDir, 'runtime.log'), cwd: join(REPO_ROOT, 'runtime', 'python') },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitFor('runtime /ready', async () => (await fetch(`${url}/ready`)).ok, RUNTIME_START_TIMEOUT_MS);
  return { url, port, proc };
}

/** A ready cortex app of `projectId` served at `upstream`, with `over` changed. */
export function resolvedApp(
  projectId: string,
  appName: string,
  upstream: string,
  over: Partial<ResolvedApp> = {},
): ResolvedApp {
  return { projectId, appName, runtime: 'cortex', upstream, ready: true, gracePeriodSeconds: 900, ...over };
}

/**
 * `watchApps` over a table the test mutates: the snapshot at once, then, on each `changed()`, every app
 * (again) and each one gone since the last report.
 */
function watchedTable(table: () => readonly ResolvedApp[]): {
  watchApps(sink: AppSink): () => void;
  changed(): void;
} {
  const watchers = new Map<AppSink, Map<string, ResolvedApp>>();
  const report = (sink: AppSink, told: Map<string, ResolvedApp>) => {
    const now = new Map(table().map((a) => [`${a.projectId}/${a.appName}`, a]));
    for (const [key, was] of told)
      if (!now.has(key)) {
        told.delete(key);
        sink.removeApp(was.projectId, was.appName);
      }
    for (const [key, app] of now) {
      told.set(key, app);
      sink.setApp({ ...app });
    }
  };
  return {
    watchApps(sink) {
      const told = new Map<string, ResolvedApp>();
      report(sink, told);
      watchers.set(sink, told);
      return () => void watchers.delete(sink);
    },
    changed() {
      for (const [sink, told] of watchers) report(sink, told);
    },
  };
}

/**
 * A resolver over a fixed table; mutate `apps` / `hosts` to change what it answers (and call `changed()`
 * so that `watchApps` and `watchDomains` watchers hear of it). It answers at once, as the cluster's resolver does from its
 * caches (local mode's answers with promises).
 */
export function staticResolver(
  apps: ResolvedApp[],
  hosts: Record<string, { projectId: string; appName: string }> = {},
): AppResolver & { apps: ResolvedApp[]; hosts: typeof hosts; changed(): void } {
  const table = watchedTable(() => r.apps);
  const domainWatchers = new Set<() => void>();
  const r: AppResolver & { apps: ResolvedApp[]; hosts: typeof hosts; changed(): void } = {
    apps,
    hosts,
    resolve(projectId, appName) {
      return r.apps.find((a) => a.projectId === projectId && a.appName === appName);
    },
    resolveHost(hostname) {
      return r.hosts[hostname];
    },
    watchApps: table.watchApps,
    watchDomains(sink) {
      const told = new Set<string>();
      const report = () => {
        for (const host of told.keys())
          if (!r.hosts[host]) {
            told.delete(host);
            sink.setDomain(host, undefined);
          }
        for (const [host, t] of Object.entries(r.hosts)) {
          told.add(host);
          sink.setDomain(host, { ...t });
        }
      };
      report();
      domainWatchers.add(report);
      return () => void domainWatchers.delete(report);
    },
    changed() {
      table.changed();
      for (const report of domainWatchers) report();
    },
  };
  return r;
}

export async function listen(
  handler: Parameters<typeof createServer>[1],
): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const addr = server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return { server, url: `http://127.0.0.1:${addr.port}` };
}

export async function closeServer(server: Server): Promise<void> {
  await stopDataPlaneOf.get(server)?.();
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
}

/**
 * A static resolver that reports replicas, like the cluster's EndpointSlices: `set` replaces an app's
 * ready replicas in every gateway that watches it.
 */
export function replicaResolver(apps: ResolvedApp[]): AppResolver & {
  /** Tells `watchApps` watchers that `apps` changed. */
  changed(): void;
  set(appName: string, urls: string[]): void;
  /** Reports that the app cannot start (as the cluster resolver does from the App's status). */
  fail(appName: string, failure: StartFailure | undefined): void;
} {
  const sinks: ReplicaSink[] = [];
  const current = new Map<string, string[]>();
  const push = (sink: ReplicaSink, appName: string, urls: string[]) => {
    const app = apps.find((a) => a.appName === appName);
    if (app)
      sink.setReplicas(
        app.projectId,
        appName,
        urls.map((url) => ({ id: url, url })),
      );
  };
  return {
    ...watchedTable(() => apps),
    async resolve(projectId, appName) {
      return apps.find((a) => a.projectId === projectId && a.appName === appName);
    },
    async resolveHost() {
      return undefined;
    },
    watchReplicas(sink) {
      sinks.push(sink);
      for (const [name, urls] of current) push(sink, name, urls);
    },
    set(appName, urls) {
      current.set(appName, urls);
      for (const sink of sinks) push(sink, appName, urls);
    },
    fail(appName, failure) {
      for (const sink of sinks) sink.setStartFailure(apps[0]?.projectId ?? '', appName, failure);
    },
  };
}

/** Which data plane is in front of a hand-off server `frontGateway` started: stopped by `closeServer`. */
const stopDataPlaneOf = new WeakMap<Server, () => Promise<void>>();
/** Bound on a native front's data plane becoming ready (start, hello, config, snapshot, bind). */
const FRONT_READY_TIMEOUT_MS = 20_000;

/**
 * The gateway served as the suite's `APPHOST_TEST_DATA_PLANE` says (design §7): `node` (default) as the
 * suites always served it, `createServer(gateway.callback())` on a loopback port; `native`, the real
 * data plane (`make build-native`) on a loopback port, handing calls to `gateway.callback()` on a
 * hand-off socket, fed from `resolver` (apps, and replicas when it reports them). `closeServer(server)`
 * stops either.
 */
export async function frontGateway(
  gateway: {
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    /** The gateway's: the data plane's admitted sync-call records go there, as serve.ts wires them. */
    recordSyncCall?(call: SyncCall): void;
  },
  opts: {
    resolver?: AppResolver;
    /** The gateway's `verifyRunToken`, made by `frontVerifier`: its verified tokens are pushed. */
    verifier?: object;
    /** The gateway's settings and balancer settings, when not the defaults: the data plane gets the same. */
    settings?: GatewaySettings;
    balancer?: BalancerSettings;
    /** This front whatever the suite's APPHOST_TEST_DATA_PLANE (a suite comparing both). */
    mode?: 'node' | 'native';
    /** Native: where the data plane's load reports go (a load reporter's `publish`). */
    publishLoad?: (apps: AppLoad[]) => void;
    /** Native: the config frame's loadReportIntervalMs (APPHOST_LOAD_REPORT_INTERVAL_MS's default otherwise). */
    loadReportIntervalMs?: number;
  } = {},
): Promise<{ server: Server; url: string }> {
  const mode = opts.mode ?? process.env.APPHOST_TEST_DATA_PLANE ?? 'node';
  if (mode === 'node') return listen(gateway.callback());
  if (mode !== 'native') throw new Error(`APPHOST_TEST_DATA_PLANE must be node or native, not ${mode}`);
  const bin = buildDataPlane();
  const dir = tempDir('apphost-front-');
  const path = join(dir, 'handoff.sock');
  const log = silentLogger();
  const registry = new Registry();
  const handoff = await serveHandoff({ path, callback: gateway.callback(), log, registry });
  // The connections the data plane hands over whole (design §3a), served as native.ts serves them.
  const handed = createPublicServer(gateway.callback());
  await listenOnSocketFile(handed.server, join(dir, HANDED_SOCKET_NAME));
  const port = await freePort();
  const env = parseGatewayEnv({
    APPHOST_PLATFORM_KEY: 'front-gateway-platform-key-0123',
    APPHOST_GATEWAY_HOST: '127.0.0.1',
    APPHOST_GATEWAY_PORT: String(port),
    APPHOST_GATEWAY_DRAIN_TIMEOUT_MS: '2000',
    APPHOST_LOG_LEVEL: 'warn',
    ...(opts.loadReportIntervalMs
      ? { APPHOST_LOAD_REPORT_INTERVAL_MS: String(opts.loadReportIntervalMs) }
      : {}),
  });
  const balancer = opts.balancer ?? balancerSettings(env);
  const feed = createStateFeed({
    gen: `front-${port}`,
    balancer,
    tokenCacheMaxEntries: env.APPHOST_RUN_TOKEN_CACHE_MAX_ENTRIES,
    now: Date.now,
  });
  const stopApps = opts.resolver?.watchApps?.(feed.apps);
  const stopDomains = opts.resolver?.watchDomains?.(feed.domains);
  if (opts.verifier) relays.get(opts.verifier)?.attach((t) => feed.remember(t));
  opts.resolver?.watchReplicas?.({ ...feed.replicas });
  const supervisor = superviseDataPlane({
    spawn: spawnDataPlane(bin, { APPHOST_GATEWAY_DATA_PLANE_THREADS: '1' }, (socket) =>
      handed.server.emit('connection', socket),
    ),
    config: withSettings(
      dataPlaneConfig(env, path, opts.resolver?.watchReplicas !== undefined),
      opts.settings,
      balancer,
    ),
    feed,
    log,
    registry,
    drainTimeoutMs: env.APPHOST_GATEWAY_DRAIN_TIMEOUT_MS,
    usage: procUsage(),
    ...(opts.publishLoad ? { onLoad: opts.publishLoad } : {}),
    ...(gateway.recordSyncCall ? { onRecords: recordsTo(gateway.recordSyncCall) } : {}),
  });
  supervisor.start();
  await waitFor(
    'the data plane in front of the gateway ready',
    async () => supervisor.ready(),
    FRONT_READY_TIMEOUT_MS,
    20,
  );
  stopDataPlaneOf.set(handoff.server, async () => {
    supervisor.handover();
    await supervisor.drain();
    handed.server.closeAllConnections();
    await new Promise((r) => handed.server.close(r));
    stopApps?.();
    stopDomains?.();
  });
  return { server: handoff.server, url: `http://127.0.0.1:${port}` };
}

/** The config frame with a suite's own gateway and balancer settings. */
function withSettings(c: ConfigMessage, g: GatewaySettings | undefined, b: BalancerSettings): ConfigMessage {
  return {
    ...c,
    gateway: g
      ? gatewayFrame(g, b, c.gateway.connectionHandoverMs)
      : { ...c.gateway, coldStartTimeoutMs: b.coldStartTimeoutMs },
    balancer: balancerFrame(b, c.balancer.routing),
  };
}

/** Relays of the verifiers `frontVerifier` made: tokens remembered before the front exists are kept. */
const relays = new WeakMap<object, { attach(sink: (t: RememberedToken) => void): void }>();

/**
 * The run-token verifier a suite gives its gateway: `verify` itself in node mode (as the suites always
 * had it); in native mode the gateway's cache over it (as serve.ts builds it), whose remembered tokens
 * `frontGateway(gateway, { verifier })` pushes to the data plane, so it serves repeated calls itself.
 */
export function frontVerifier(
  verify: RunTokenVerifier,
  mode = process.env.APPHOST_TEST_DATA_PLANE ?? 'node',
): (token: string) => MaybePromise<RunTokenClaims> {
  if (mode !== 'native') return verify;
  const held: RememberedToken[] = [];
  let sink: ((t: RememberedToken) => void) | undefined;
  const cached = cachedRunTokenVerifier(verify, {
    ttlMs: 60_000,
    maxEntries: 10_000,
    onRemember: (t) => (sink ? sink(t) : held.push(t)),
  });
  relays.set(cached, {
    attach(s) {
      sink = s;
      for (const t of held.splice(0)) s(t);
    },
  });
  return cached;
}

/** Sum of a metric's samples in a /metrics text whose labels include `labels`. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}
