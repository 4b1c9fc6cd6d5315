/**
 * `apphost <command>`: which module serves each command. Each piece is loaded with a lazy import()
 * so a piece whose dependencies are missing (or not written yet) never breaks another command.
 */
import { readFileSync } from 'node:fs';
import { CliError, ConfigFileError, EXIT_USAGE, type LineIo, UsageError } from '../shared/cli/command.ts';

export interface CommandIo extends LineIo {
  /** Fires on Ctrl-C for client commands (main.ts); a command stops what it streams and returns. */
  signal?: AbortSignal;
  /** Rewrites the current stderr line (a progress bar); only set when stderr is a terminal. */
  status?: (text: string) => void;
}

/** What a command module exports: a service entrypoint `main(env)` or an argv-taking command. */
export type Runner = (argv: string[], env: NodeJS.ProcessEnv, io: CommandIo) => Promise<unknown>;

export interface Command {
  name: string;
  summary: string;
  /** `client`: talks to a running apphost (Ctrl-C aborts it, main.ts); `service`: a long-running piece. */
  kind: 'client' | 'service' | 'tool';
  load: () => Promise<Runner>;
}

export { CliError, EXIT_USAGE, UsageError } from '../shared/cli/command.ts';

/**
 * A command's module, imported with a literal specifier (`() => import('../gateway/main.ts')`) so tsc
 * checks it and rewrites it for the build; the import stays lazy, so a command loads only its piece.
 */
type Loader = () => Promise<object>;

async function loadExport(load: Loader, name: string): Promise<unknown> {
  const mod = (await load()) as Record<string, unknown>;
  if (!(name in mod)) throw new Error(`the command's module does not export '${name}'`);
  return mod[name];
}

/** A long-running piece: `main(env)`, configured by env only; --help describes it. */
const service =
  (load: Loader, help: ServiceHelp): (() => Promise<Runner>) =>
  async () => {
    const main = (await loadExport(load, 'main')) as (env: NodeJS.ProcessEnv) => Promise<void>;
    if (typeof main !== 'function')
      throw new Error(`${help.name}: the module does not export a function 'main'`);
    return async (argv, env, io) => {
      if (argv.length === 1 && (argv[0] === '--help' || argv[0] === '-h')) {
        io.out(serviceHelp(help));
        return 0;
      }
      if (argv.length > 0)
        throw new UsageError(`unexpected arguments: ${argv.join(' ')} (a service is configured by env)`);
      await main(env);
    };
  };

/** A command taking flags: `fn(argv, env, io)`. */
const command =
  (load: Loader, name: string): (() => Promise<Runner>) =>
  async () => {
    const fn = await loadExport(load, name);
    if (typeof fn !== 'function')
      throw new Error(`the command's module does not export a function '${name}'`);
    return fn as Runner;
  };

/** A command defined with clientCommand(): the export `name` is `{spec, run}`. */
const client =
  (load: Loader, name: string): (() => Promise<Runner>) =>
  async () =>
    ((await loadExport(load, name)) as { run: Runner }).run;

export interface ServiceHelp {
  name: string;
  summary: string;
  settings: ReadonlyArray<readonly [string, string]>;
  docs: string;
  example: string;
}

export function serviceHelp(h: ServiceHelp): string {
  const width = Math.max(...h.settings.map(([n]) => n.length)) + 2;
  return [
    `usage: apphost ${h.name}`,
    '',
    h.summary,
    'A long-running service: it takes no flags and reads its settings from env; SIGTERM stops it gracefully.',
    '',
    'flags:',
    '  -h, --help  print this help',
    '',
    `settings (env; every one, with defaults and bounds, in ${h.docs}):`,
    ...h.settings.map(([n, d]) => `  ${n.padEnd(width)}${d}`),
    '',
    'example:',
    `  ${h.example}`,
  ].join('\n');
}

const NATS = ['NATS_URL', 'NATS server with JetStream (nats://127.0.0.1:4222)'] as const;
const OPS = ['APPHOST_OPS_PORT', '/healthz, /readyz, /metrics port (9090)'] as const;
const LOG = ['APPHOST_LOG_LEVEL', 'pino level (info)'] as const;
const KUBE = ['KUBECONFIG', 'kubeconfig file (in-cluster service account when unset)'] as const;

export const COMMANDS: readonly Command[] = [
  {
    name: 'dev',
    kind: 'tool',
    summary: 'run the platform locally: apps as local processes, NATS, gateway and management API',
    load: command(() => import('../local/main.ts'), 'runDev'),
  },
  {
    name: 'init',
    kind: 'tool',
    summary: 'create an app folder (main.py, apphost.toml, .gitignore) ready to deploy',
    load: command(() => import('./init.ts'), 'runInitCommand'),
  },
  {
    name: 'deploy',
    kind: 'client',
    summary:
      'deploy an app folder: upload, build its dependencies, roll it out, wait until it serves or fails',
    load: client(() => import('./deploy.ts'), 'deployCommand'),
  },
  {
    name: 'apps',
    kind: 'client',
    summary: "the project's apps: list, get (with recent builds), delete",
    load: command(() => import('./apps.ts'), 'runAppsCommand'),
  },
  {
    name: 'login',
    kind: 'client',
    summary: 'check a base URL, project and token and save them as a profile of the config file',
    load: client(() => import('./login.ts'), 'loginCommand'),
  },
  {
    name: 'run',
    kind: 'client',
    summary: 'call a function: sync, --async, --webhook URL or --stream (prints events as they arrive)',
    load: client(() => import('./run.ts'), 'runCommand'),
  },
  {
    name: 'runs',
    kind: 'client',
    summary: 'async runs: list, get (with the result), cancel',
    load: command(() => import('./runs.ts'), 'runRunsCommand'),
  },
  {
    name: 'logs',
    kind: 'client',
    summary: "an app's logs (every replica), --follow to stream them",
    load: client(() => import('./logs.ts'), 'logsCommand'),
  },
  {
    name: 'tokens',
    kind: 'client',
    summary: 'service-account tokens of the project: create, list, revoke',
    load: command(() => import('./tokens.ts'), 'runTokensCommand'),
  },
  {
    name: 'gateway',
    kind: 'service',
    summary: 'the run API ({api_url}) and the async run worker',
    load: service(() => import('../gateway/main.ts'), {
      name: 'gateway',
      summary: 'The run API ({api_url}: sync, async, streams, custom domains) and the async run worker.',
      settings: [
        NATS,
        ['APPHOST_PLATFORM_KEY', 'key that seals webhook secrets in NATS (required)'],
        [
          'APPHOST_RUN_TOKEN_KEYS_NAMESPACE',
          'namespace of the run-token key Secret, watched (apphost-system)',
        ],
        ['APPHOST_RUN_TOKEN_KEYS_FILE', 'a run-token key set JSON file instead of the Secret'],
        ['APPHOST_GATEWAY_PORT', 'run API port (8080)'],
        ['APPHOST_GATEWAY_PROCESSES', 'gateway processes sharing the port: a number or auto (1)'],
        ['APPHOST_RUN_WORKER', 'also run the async run worker (true)'],
        ['APPHOST_GATEWAY_SYNC_TIMEOUT_MS', 'bound on a sync call'],
        OPS,
        LOG,
      ],
      docs: 'docs/gateway.md and docs/runs.md',
      example:
        'NATS_URL=nats://127.0.0.1:4222 APPHOST_PLATFORM_KEY=$(cat key) APPHOST_RUN_TOKEN_KEYS_FILE=keys.json apphost gateway',
    }),
  },
  {
    name: 'webhooks',
    kind: 'service',
    summary: 'the webhook dispatcher',
    load: service(() => import('../webhooks/main.ts'), {
      name: 'webhooks',
      summary: 'The webhook dispatcher: delivers finished runs to webhooks with retries and signatures.',
      settings: [
        NATS,
        ['APPHOST_PLATFORM_KEY', 'key that opens sealed webhook secrets (required)'],
        ['APPHOST_WEBHOOK_ALLOW_CIDRS', 'internal ranges webhooks may reach (none)'],
        OPS,
        LOG,
      ],
      docs: 'docs/webhooks.md',
      example: 'NATS_URL=nats://127.0.0.1:4222 APPHOST_PLATFORM_KEY=$(cat key) apphost webhooks',
    }),
  },
  {
    name: 'management',
    kind: 'service',
    summary: 'the management API ({base_url})',
    load: service(() => import('../management/main.ts'), {
      name: 'management',
      summary: 'The management API ({base_url}): domains, service accounts, run tokens, runs, logs.',
      settings: [
        KUBE,
        NATS,
        ['APPHOST_MANAGEMENT_PORT', 'management API port (8081)'],
        ['APPHOST_RUN_TOKEN_KEYS_NAMESPACE', 'namespace of the run-token key Secret (apphost-system)'],
        OPS,
        LOG,
      ],
      docs: 'docs/management.md',
      example: 'KUBECONFIG=~/.kube/config NATS_URL=nats://127.0.0.1:4222 apphost management',
    }),
  },
  {
    name: 'operator',
    kind: 'service',
    summary: 'the Kubernetes operator (App, DomainAssignment)',
    load: service(() => import('../operator/main.ts'), {
      name: 'operator',
      summary: 'The Kubernetes operator: App -> Deployment + Service, DomainAssignment -> Ingress.',
      settings: [KUBE, ['POD_NAMESPACE', 'namespace of its Lease and the gateway'], OPS, LOG],
      docs: 'docs/operator.md',
      example: 'KUBECONFIG=~/.kube/config POD_NAMESPACE=apphost-system apphost operator',
    }),
  },
  {
    name: 'create-service-account',
    kind: 'tool',
    summary: 'create a service account with a kubeconfig (bootstrap) and print its token',
    load: command(() => import('../management/cli.ts'), 'runCreateServiceAccountCommand'),
  },
  {
    name: 'ensure-platform-key',
    kind: 'tool',
    summary: 'create the platform key Secret if it is missing (the plain-YAML install runs this as a Job)',
    load: command(() => import('./ensure-platform-key.ts'), 'runEnsurePlatformKeyCommand'),
  },
  {
    name: 'fetch-artifacts',
    kind: 'tool',
    summary:
      "fetch and check an app version's bundle and dependencies (a deployed App's init container runs this)",
    load: command(() => import('../builds/fetch-command.ts'), 'runFetchArtifactsCommand'),
  },
  {
    name: 'publish-dependencies',
    kind: 'tool',
    summary: 'store a built dependency set under its key (the last step of a dependency build Job)',
    load: command(() => import('../builds/publish-command.ts'), 'runPublishDependenciesCommand'),
  },
  {
    name: 'rotate-run-token-keys',
    kind: 'tool',
    summary: 'put a fresh run-token signing key in front (older tokens stay valid until they expire)',
    load: command(() => import('../management/cli.ts'), 'runRotateRunTokenKeysCommand'),
  },
];

export function version(): string {
  // src/cli and dist/cli both sit two levels below the package root.
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version?: string;
  };
  return pkg.version ?? '0.0.0';
}

export function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length), 'version'.length) + 2;
  return [
    'usage: apphost <command> [flags]',
    '',
    'commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}`),
    `  ${'version'.padEnd(width)}print the version`,
    `  ${'help'.padEnd(width)}print this help`,
    '',
    "Run 'apphost <command> --help' for a command's flags, settings and an example.",
    'Client commands find the API, project and token in flags, APPHOST_* env or the config file (docs/cli.md).',
  ].join('\n');
}

/** Runs one command line; resolves to the process exit code (services resolve once started). */
export async function runCli(argv: string[], env: NodeJS.ProcessEnv, io: CommandIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    io.out(usage());
    return name === undefined ? EXIT_USAGE : 0;
  }
  if (name === 'version' || name === '--version' || name === '-v') {
    io.out(`apphost ${version()}`);
    return 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    io.err(`apphost: unknown command '${name}'\n\n${usage()}`);
    return EXIT_USAGE;
  }
  let run: Runner;
  try {
    run = await command.load();
  } catch (err) {
    io.err(`apphost ${name}: cannot load this command: ${(err as Error).message}`);
    return 1;
  }
  try {
    const code = await run(rest, env, io);
    return typeof code === 'number' ? code : 0;
  } catch (err) {
    const who = `apphost ${(err as { command?: string }).command ?? name}`;
    if (err instanceof UsageError || isParseArgsError(err)) {
      io.err(`${who}: ${(err as Error).message}`);
      io.err(`Run '${who} --help' for its arguments and flags.`);
      return EXIT_USAGE;
    }
    if (err instanceof CliError) {
      io.err(`${who}: ${err.message}`);
      if (err.hint) io.err(`  next: ${err.hint}`);
      return err.exitCode;
    }
    if (err instanceof ConfigFileError) {
      io.err(`${who}: ${err.message}`);
      io.err("  next: fix or remove it ('apphost login' and 'apphost dev' write a fresh one)");
      return 1;
    }
    if (io.signal?.aborted) return 130;
    throw err;
  }
}

/** node:util parseArgs throws TypeErrors with ERR_PARSE_ARGS_* codes for unknown/malformed flags. */
export function isParseArgsError(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_');
}
