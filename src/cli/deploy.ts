/**
 * `apphost deploy [DIR]`: checks the app folder (apphost.toml and the bundle, with the same rules as the
 * server), uploads the bundle with a progress bar, streams the build log, and waits until the new version
 * serves or fails. The last line on stdout and the exit code say how it ended (docs/cli.md).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  APP_CONFIG_FILE,
  type AppConfig,
  AppConfigError,
  parseAppConfig,
  runtimeOf,
} from '../apis/v1alpha1/app-config.ts';
import { BundleError, DEFAULT_BUNDLE_LIMITS, inspectBundle, packBundle } from '../builds/bundle.ts';
import { CliError, UsageError } from '../shared/cli/command.ts';
import type { ApiClient } from './api-client.ts';
import { type ClientContext, clientCommand } from './client-command.ts';
import { json } from './output.ts';
import { createProgress, formatBytes, progressStream } from './progress.ts';
import { sseEvents } from './sse.ts';

/** Exit codes a CI script can rely on. */
export const DeployExit = {
  Ready: 0,
  /** The deploy failed (refused, build failed, did not start): the version that served before still does. */
  Failed: 1,
  /** Bad flags. */
  Usage: 2,
  /** The wait ended first; the deploy carries on on the server. */
  StillRunning: 3,
} as const;

export const DEFAULT_DEPLOY_TIMEOUT_SECONDS = 1800;
/** Pause before following a build log again after the stream dropped. */
const REFOLLOW_PAUSE_MS = 1_000;

/** A build as the management API presents it (schema Build). */
export interface BuildView {
  build_id: string;
  app_name: string;
  state: 'queued' | 'building' | 'deploying' | 'ready' | 'failed';
  bundle: { digest: string; bytes: number; files: number };
  dependencies?: { digest: string; cached: boolean };
  rollout?: { ready: number; desired: number; message: string };
  rolled_back?: boolean;
  error?: { code: string; message: string };
  links: { self: string; log: string };
}

/** An app as the management API presents it (schema App). */
export interface AppView {
  name: string;
  runtime: 'cortex' | 'custom';
  ready: boolean;
  ready_replicas: number;
  desired_replicas: number;
  message?: string;
  created_at?: string;
  build_id?: string;
  bundle?: string;
  dependencies?: string;
  url?: string;
  config: AppConfig;
}

const terminal = (b: BuildView) => b.state === 'ready' || b.state === 'failed';

/** The functions main.py defines at top level (the curl line names one): `run` first when there is one. */
export function functionsOf(mainPy: string): string[] {
  const names = [...mainPy.matchAll(/^(?:async\s+)?def\s+([A-Za-z]\w*)\s*\(/gm)].map((m) => m[1] as string);
  return names.includes('run') ? ['run', ...names.filter((n) => n !== 'run')] : names;
}

function loadConfig(dir: string): AppConfig {
  const file = join(dir, APP_CONFIG_FILE);
  if (!existsSync(file))
    throw new CliError(
      `no ${APP_CONFIG_FILE} in ${dir}`,
      `'apphost init NAME' creates an app folder with one`,
    );
  try {
    return parseAppConfig(readFileSync(file, 'utf8'), file);
  } catch (err) {
    if (err instanceof AppConfigError)
      throw new CliError(
        `${file} is not valid:\n${err.problems.map((p) => `  ${p.path ? `${p.path}: ` : ''}${p.message}`).join('\n')}`,
        'fix these keys (docs/apphost-toml.md lists every key and its rule)',
      );
    throw err;
  }
}

/** Follows the build's log until it is final or the deadline passes; prints each line as it comes. */
async function waitForBuild(
  ctx: ClientContext,
  client: ApiClient,
  first: BuildView,
  deadline: number,
): Promise<BuildView> {
  let build = first;
  let lastSeq = 0;
  while (!terminal(build) && ctx.now() < deadline && !ctx.signal.aborted) {
    try {
      const res = await client.open(build.links.log, {
        query: { follow: 'true' },
        headers: { accept: 'text/event-stream', ...(lastSeq ? { 'last-event-id': String(lastSeq) } : {}) },
      });
      const body = res.body as ReadableStream<Uint8Array>;
      const stop = setTimeout(
        () => void body.cancel().catch(() => undefined),
        Math.max(0, deadline - ctx.now()),
      );
      try {
        for await (const e of sseEvents(body)) {
          if (e.event === 'log') {
            const line = JSON.parse(e.data) as { seq: number; text: string };
            lastSeq = line.seq;
            if (!ctx.json) ctx.io.err(`  ${line.text}`);
          } else if (e.event === 'end') {
            const end = JSON.parse(e.data) as { reason: string; build?: BuildView };
            if (end.build) build = end.build;
            break;
          }
        }
      } finally {
        clearTimeout(stop);
      }
    } catch (err) {
      if (ctx.signal.aborted) break;
      if (!(err instanceof CliError) && !(err instanceof TypeError)) throw err;
      // The stream dropped (server restart, network): follow again from the last line.
    }
    if (!terminal(build)) {
      build = await client.json<BuildView>(build.links.self).catch(() => build);
      if (!terminal(build) && ctx.now() < deadline)
        await new Promise((r) => setTimeout(r, REFOLLOW_PAUSE_MS));
    }
  }
  return build;
}

export const deployCommand = clientCommand(
  {
    name: 'deploy',
    summary:
      'Deploy the app in DIR (default .): check it, upload its bundle, build its dependencies, roll it out; wait until it serves or fails.',
    description:
      'The bundle is what apphost.toml include/exclude choose; the build log streams to stderr. The last line on\n' +
      'stdout says how it ended — "deployed APP: build ID is ready", "failed APP: build ID CODE: why" or\n' +
      '"waiting APP: …" — and so does the exit code: 0 ready, 1 failed (the version that served before\n' +
      'still does), 2 bad flags, 3 the wait ended first (the deploy carries on; see apphost apps get APP).',
    args: [{ name: 'DIR', description: 'the app folder, with apphost.toml (default: .)', optional: true }],
    flags: {
      'no-wait': {
        type: 'boolean',
        description: 'return once the bundle is accepted (exit 0), without waiting',
      },
      timeout: {
        type: 'string',
        value: 'SECONDS',
        description: `how long to wait for the new version to serve or fail [APPHOST_DEPLOY_TIMEOUT_SECONDS] (${DEFAULT_DEPLOY_TIMEOUT_SECONDS})`,
      },
    },
    settings: [
      {
        name: 'APPHOST_DEPLOY_TIMEOUT_SECONDS',
        description: `default for --timeout (${DEFAULT_DEPLOY_TIMEOUT_SECONDS})`,
      },
    ],
    examples: [
      'apphost deploy',
      'apphost deploy services/shop --timeout 600',
      'apphost deploy --json | jq -r .build.state',
    ],
  },
  async (ctx) => {
    try {
      return await deploy(ctx);
    } catch (err) {
      // Refused or unreachable: the last line on stdout says so too, as for a failed build.
      if (err instanceof CliError && err.exitCode === 1 && !ctx.json)
        ctx.io.out(`failed ${ctx.args.DIR ?? '.'}: ${err.message.split('\n')[0]}`);
      throw err;
    }
  },
);

async function deploy(ctx: ClientContext): Promise<number> {
  const rawTimeout =
    (typeof ctx.values.timeout === 'string' ? ctx.values.timeout : undefined) ??
    ctx.env.APPHOST_DEPLOY_TIMEOUT_SECONDS ??
    String(DEFAULT_DEPLOY_TIMEOUT_SECONDS);
  if (!/^\d+$/.test(rawTimeout) || Number(rawTimeout) < 1)
    throw new UsageError(`--timeout must be a whole number of seconds, got '${rawTimeout}'`);
  const deadline = ctx.now() + Number(rawTimeout) * 1000;
  const dir = resolve(ctx.args.DIR ?? '.');
  const say = (line: string) => {
    if (!ctx.json) ctx.io.err(line);
  };

  // 1. The folder, checked with the server's rules before anything is sent.
  const config = loadConfig(dir);
  const app = config.app.name;
  let packed: Awaited<ReturnType<typeof packBundle>>;
  try {
    packed = await packBundle(dir, config, DEFAULT_BUNDLE_LIMITS);
    await inspectBundle(packed.data, DEFAULT_BUNDLE_LIMITS);
  } catch (err) {
    if (err instanceof BundleError)
      throw new CliError(
        `${app}: the bundle cannot be deployed: ${err.message}`,
        err.problem === 'symlink_out' || err.problem === 'too_large' || err.problem === 'too_many_files'
          ? 'leave such files out with exclude in apphost.toml'
          : undefined,
      );
    throw err;
  }
  say(`bundle: ${packed.files} files, ${formatBytes(packed.data.length)} (${packed.digest})`);

  // 2. Upload, with progress.
  const client = ctx.client();
  const progress = createProgress('upload', packed.data.length, {
    line: say,
    status: ctx.json ? undefined : ctx.io.status,
  });
  const digest = createHash('sha256').update(packed.data).digest('base64');
  const accepted = await client.json<BuildView>(client.projectPath('apps'), {
    method: 'POST',
    body: progressStream(packed.data, progress),
    headers: { 'content-type': 'application/gzip', 'content-digest': `sha-256=:${digest}:` },
    timeoutMs: Math.max(1_000, deadline - ctx.now()),
  });
  progress.done();
  say(`build ${accepted.build_id}: accepted`);
  if (ctx.values['no-wait']) {
    if (ctx.json) ctx.io.out(json({ build: accepted }));
    else ctx.io.out(`queued ${app}: build ${accepted.build_id} (follow it: apphost apps get ${app})`);
    return DeployExit.Ready;
  }

  // 3. The build log, until the new version serves or fails.
  const build = await waitForBuild(ctx, client, accepted, deadline);
  if (ctx.signal.aborted)
    throw new CliError('interrupted; the deploy carries on on the server', undefined, 130);
  if (build.state === 'ready') {
    const view = await client.json<AppView>(client.projectPath('apps', app)).catch(() => undefined);
    const apiUrl = client.conn.apiUrl?.replace(/\/+$/, '');
    const url = view?.url ?? (apiUrl ? `${apiUrl}/v4/${client.conn.project}/${app}` : undefined);
    const fn = runtimeOf(config) === 'cortex' ? functionsOf(readMain(dir))[0] : undefined;
    if (ctx.json) {
      ctx.io.out(json({ build, ...(view ? { app: view } : {}), ...(url ? { url } : {}) }));
      return DeployExit.Ready;
    }
    if (url) {
      const target = fn ? `${url}/${fn}` : `${url}/`;
      ctx.io.out(`url:  ${url}`);
      ctx.io.out(
        `curl: curl -X POST '${target}' -H "Authorization: Bearer $APPHOST_RUN_TOKEN" -H 'Content-Type: application/json' -d '{}'`,
      );
      if (fn) ctx.io.out(`      apphost run ${app} ${fn} --data '{}'`);
    }
    ctx.io.out(`deployed ${app}: build ${build.build_id} is ready`);
    return DeployExit.Ready;
  }
  if (ctx.json) ctx.io.out(json({ build }));
  if (build.state === 'failed') {
    const why = build.error?.message ?? 'unknown';
    if (!ctx.json) {
      ctx.io.err(`the deploy failed (${build.error?.code ?? 'failed'}):\n${why}`);
      if (build.rolled_back) ctx.io.err('it was rolled back: the version that served before still does');
      ctx.io.out(
        `failed ${app}: build ${build.build_id} ${build.error?.code ?? 'failed'}: ${why.split('\n')[0]}`,
      );
    }
    return DeployExit.Failed;
  }
  if (!ctx.json)
    ctx.io.out(
      `waiting ${app}: build ${build.build_id} is still ${build.state} after ${rawTimeout} s (it carries on: apphost apps get ${app})`,
    );
  return DeployExit.StillRunning;
}

function readMain(dir: string): string {
  try {
    return readFileSync(join(dir, 'main.py'), 'utf8');
  } catch {
    return '';
  }
}
