/**
 * How a CLI command describes itself: its flags, positional arguments, settings (env) and examples.
 * One spec drives both the parser (node:util parseArgs) and the `--help` text, so they cannot disagree.
 */
import { parseArgs } from 'node:util';

export interface FlagSpec {
  type: 'string' | 'boolean';
  short?: string;
  /** Placeholder in help, e.g. `URL`. */
  value?: string;
  description: string;
  /** Shown in help as `(default: …)`. */
  default?: string;
}

export interface ArgSpec {
  name: string;
  description: string;
  optional?: boolean;
}

export interface SettingSpec {
  name: string;
  description: string;
}

export interface CommandSpec {
  /** As typed after `apphost`, e.g. `runs list`. */
  name: string;
  summary: string;
  /** Longer explanation printed under the usage line. */
  description?: string;
  args?: readonly ArgSpec[];
  flags?: Readonly<Record<string, FlagSpec>>;
  /** Env variables the command reads. */
  settings?: readonly SettingSpec[];
  examples: readonly string[];
}

/** A usage error (bad flag, missing argument): printed with a pointer to --help, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
  /** The command line's command, e.g. `runs get`, when a group dispatched it. */
  command?: string;
}

/**
 * The CLI's config file (config-file.ts) is not JSON or not an apphost config. Here, not in config-file.ts,
 * so src/cli/commands.ts can tell it apart without loading zod into every command (`apphost gateway`).
 */
export class ConfigFileError extends Error {
  override readonly name = 'ConfigFileError';
}

/** A failure the user can act on: `hint` says what to do next. Exit code 1. */
export class CliError extends Error {
  override readonly name = 'CliError';
  command?: string;
  readonly hint: string | undefined;
  readonly exitCode: number;
  constructor(message: string, hint?: string, exitCode = 1) {
    super(message);
    this.hint = hint;
    this.exitCode = exitCode;
  }
}

export const EXIT_USAGE = 2;

export const HELP_FLAG: FlagSpec = { type: 'boolean', short: 'h', description: 'print this help' };

export interface Parsed {
  values: Record<string, string | boolean | undefined>;
  args: Record<string, string | undefined>;
  help: boolean;
}

/** Where a command writes its lines. */
export interface LineIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

/** The process's stdout and stderr, a line at a time. */
export const STDIO: LineIo = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

/** `parseCommand`, except that `--help` prints the command's help and gives undefined (exit 0). */
export function parseOrHelp(
  spec: CommandSpec,
  argv: readonly string[],
  io: Pick<LineIo, 'out'>,
): Parsed | undefined {
  const parsed = parseCommand(spec, argv);
  if (!parsed.help) return parsed;
  io.out(helpText(spec));
  return undefined;
}

/** Parses argv against the spec; `--help` always wins over missing arguments. */
export function parseCommand(spec: CommandSpec, argv: readonly string[]): Parsed {
  const flags = { ...spec.flags, help: HELP_FLAG };
  const options = Object.fromEntries(
    Object.entries(flags).map(([name, f]) => [
      name,
      f.short ? { type: f.type, short: f.short } : { type: f.type },
    ]),
  );
  let parsed: { values: Record<string, unknown>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...argv], options, allowPositionals: true, strict: true }) as typeof parsed;
  } catch (err) {
    if (argv.includes('--help') || argv.includes('-h')) return { values: {}, args: {}, help: true };
    throw new UsageError((err as Error).message);
  }
  const values = parsed.values as Parsed['values'];
  if (values.help) return { values, args: {}, help: true };
  const specs = spec.args ?? [];
  if (parsed.positionals.length > specs.length)
    throw new UsageError(`unexpected argument '${parsed.positionals[specs.length]}'`);
  const args: Record<string, string | undefined> = {};
  specs.forEach((a, i) => {
    const v = parsed.positionals[i];
    if (v === undefined && !a.optional) throw new UsageError(`missing argument ${a.name}`);
    args[a.name] = v;
  });
  return { values, args, help: false };
}

export function usageLine(spec: CommandSpec): string {
  const args = (spec.args ?? []).map((a) => (a.optional ? `[${a.name}]` : a.name));
  return ['usage: apphost', spec.name, ...args, Object.keys(spec.flags ?? {}).length > 0 ? '[flags]' : '']
    .filter(Boolean)
    .join(' ');
}

function rows(entries: Array<[string, string]>): string[] {
  const width = Math.min(Math.max(...entries.map(([l]) => l.length)) + 2, 34);
  return entries.map(([l, d]) =>
    l.length + 2 > width ? `  ${l}\n  ${' '.repeat(width)}${d}` : `  ${l.padEnd(width)}${d}`,
  );
}

/** The `--help` text: usage, summary, arguments, flags, settings, examples. */
export function helpText(spec: CommandSpec): string {
  const out = [usageLine(spec), '', spec.summary];
  if (spec.description) out.push('', spec.description);
  if (spec.args?.length) out.push('', 'arguments:', ...rows(spec.args.map((a) => [a.name, a.description])));
  const flags = Object.entries({ ...spec.flags, help: HELP_FLAG });
  out.push(
    '',
    'flags:',
    ...rows(
      flags.map(([name, f]) => [
        `${f.short ? `-${f.short}, ` : ''}--${name}${f.type === 'string' ? ` ${f.value ?? 'VALUE'}` : ''}`,
        `${f.description}${f.default !== undefined ? ` (default: ${f.default})` : ''}`,
      ]),
    ),
  );
  if (spec.settings?.length)
    out.push('', 'settings (env):', ...rows(spec.settings.map((s) => [s.name, s.description])));
  out.push('', spec.examples.length > 1 ? 'examples:' : 'example:', ...spec.examples.map((e) => `  ${e}`));
  return out.join('\n');
}
