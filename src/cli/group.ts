/** A command with subcommands (`apphost runs list`): dispatches, and lists them on --help. */

import { type CommandSpec, UsageError } from '../shared/cli/command.ts';
import type { CommandIo, Runner } from './commands.ts';

export interface Subcommand {
  spec: CommandSpec;
  run: Runner;
}

export function groupHelp(name: string, summary: string, subs: Readonly<Record<string, Subcommand>>): string {
  const width = Math.max(...Object.keys(subs).map((k) => k.length)) + 2;
  return [
    `usage: apphost ${name} <command> [flags]`,
    '',
    summary,
    '',
    'commands:',
    ...Object.entries(subs).map(([k, s]) => `  ${k.padEnd(width)}${s.spec.summary}`),
    '',
    'flags:',
    '  -h, --help  print this help',
    '',
    'settings (env): each command lists its own.',
    '',
    'examples:',
    ...Object.values(subs).map((s) => `  ${s.spec.examples[0]}`),
    '',
    `Run 'apphost ${name} <command> --help' for its flags and settings.`,
  ].join('\n');
}

export function group(name: string, summary: string, subs: Readonly<Record<string, Subcommand>>): Runner {
  return async (argv: string[], env: NodeJS.ProcessEnv, io: CommandIo) => {
    const [sub, ...rest] = argv;
    if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
      (sub === undefined ? io.err : io.out)(groupHelp(name, summary, subs));
      return sub === undefined ? 2 : 0;
    }
    const target = Object.hasOwn(subs, sub) ? subs[sub] : undefined;
    if (!target) throw new UsageError(`unknown command '${sub}'; one of: ${Object.keys(subs).join(', ')}`);
    try {
      return await target.run(rest, env, io);
    } catch (err) {
      if (err && typeof err === 'object') (err as { command?: string }).command = `${name} ${sub}`;
      throw err;
    }
  };
}
