/**
 * `apphost <command>`: which module serves each command. Each piece is loaded with a lazy import()
 * so a piece whose dependencies are missing (or not written yet) never breaks another command.
 */
import { readFileSync } from 'node:fs';

export interface CommandIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

/** What a command module exports: a service entrypoint `main(env)` or an argv-taking command. */
type Runner = (argv: string[], env: NodeJS.ProcessEnv) => Promise<unknown>;

export interface Command {
  name: string;
  summary: string;
  load: () => Promise<Runner>;
}

/** Thrown by a command for a usage error (bad flag, missing argument): printed, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export const EXIT_USAGE = 2;

/**
 * Imports `specifier` and returns its export `name`, checked to be a function. The specifier is a
 * variable on purpose: each piece is typechecked on its own, and a piece that is absent or broken
 * fails only its own command (tsc still rewrites `.ts` to `.js` in the build).
 */
async function loadExport(specifier: string, name: string): Promise<(...args: never[]) => unknown> {
  const mod = (await import(specifier)) as Record<string, unknown>;
  const fn = mod[name];
  if (typeof fn !== 'function') throw new Error(`${specifier} does not export a function '${name}'`);
  return fn as (...args: never[]) => unknown;
}

/** A long-running piece: `main(env)`, configured by env only. */
const service =
  (specifier: string): (() => Promise<Runner>) =>
  async () => {
    const main = (await loadExport(specifier, 'main')) as (env: NodeJS.ProcessEnv) => Promise<void>;
    return async (argv, env) => {
      if (argv.length > 0)
        throw new UsageError(`unexpected arguments: ${argv.join(' ')} (configure with env)`);
      await main(env);
    };
  };

/** A command taking flags: `fn(argv, env)`. */
const command =
  (specifier: string, name: string): (() => Promise<Runner>) =>
  async () =>
    (await loadExport(specifier, name)) as Runner;

export const COMMANDS: readonly Command[] = [
  {
    name: 'dev',
    summary: 'run the platform locally: apps as local processes, NATS, gateway and management API',
    load: command('../local/main.ts', 'runDev'),
  },
  {
    name: 'gateway',
    summary: 'the run API ({api_url}) and the async run worker',
    load: service('../gateway/main.ts'),
  },
  { name: 'webhooks', summary: 'the webhook dispatcher', load: service('../webhooks/main.ts') },
  { name: 'management', summary: 'the management API ({base_url})', load: service('../management/main.ts') },
  {
    name: 'operator',
    summary: 'the Kubernetes operator (App, DomainAssignment)',
    load: service('../operator/main.ts'),
  },
  {
    name: 'create-service-account',
    summary: 'create a service account and print its token',
    load: command('../management/cli.ts', 'runCreateServiceAccountCommand'),
  },
  {
    name: 'ensure-platform-key',
    summary: 'create the platform key Secret if it is missing (the plain-YAML install runs this as a Job)',
    load: command('./ensure-platform-key.ts', 'runEnsurePlatformKeyCommand'),
  },
  {
    name: 'rotate-run-token-keys',
    summary: 'put a fresh run-token signing key in front (older tokens stay valid until they expire)',
    load: command('../management/cli.ts', 'runRotateRunTokenKeysCommand'),
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
    "Run 'apphost <command> --help' for a command's flags. Services read their settings from env (docs/).",
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
    const code = await run(rest, env);
    return typeof code === 'number' ? code : 0;
  } catch (err) {
    if (err instanceof UsageError || isParseArgsError(err)) {
      io.err(`apphost ${name}: ${(err as Error).message}`);
      return EXIT_USAGE;
    }
    throw err;
  }
}

/** node:util parseArgs throws TypeErrors with ERR_PARSE_ARGS_* codes for unknown/malformed flags. */
export function isParseArgsError(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_');
}
