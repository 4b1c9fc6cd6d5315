import { describe, expect, it } from 'vitest';
import { type CommandSpec, helpText, parseCommand, UsageError } from './command.ts';

const spec: CommandSpec = {
  name: 'things get',
  summary: 'Get a thing.',
  args: [
    { name: 'ID', description: 'the thing' },
    { name: 'PART', description: 'a part', optional: true },
  ],
  flags: {
    deep: { type: 'boolean', description: 'all of it' },
    as: { type: 'string', value: 'FMT', description: 'format', default: 'text' },
  },
  settings: [{ name: 'THINGS_URL', description: 'where things are' }],
  examples: ['apphost things get 1 --deep'],
};

describe('parseCommand', () => {
  it('maps positionals to the named arguments and flags to values', () => {
    expect(parseCommand(spec, ['1', '--deep', '--as', 'json'])).toEqual({
      values: { deep: true, as: 'json' },
      args: { ID: '1', PART: undefined },
      help: false,
    });
  });

  it('answers --help even when arguments are missing or flags unknown', () => {
    expect(parseCommand(spec, ['--help']).help).toBe(true);
    expect(parseCommand(spec, ['--bogus', '-h']).help).toBe(true);
  });

  it.each([
    [[], /missing argument ID/],
    [['1', '2', '3'], /unexpected argument '3'/],
    [['1', '--bogus'], /Unknown option '--bogus'/],
    [['1', '--as'], /--as/],
  ])('%j is a usage error', (argv, message) => {
    expect(() => parseCommand(spec, argv)).toThrow(UsageError);
    expect(() => parseCommand(spec, argv)).toThrow(message);
  });
});

describe('helpText', () => {
  it('has the usage line, arguments, flags with defaults, settings and the example', () => {
    const h = helpText(spec);
    expect(h.split('\n')[0]).toBe('usage: apphost things get ID [PART] [flags]');
    expect(h).toMatch(/arguments:\n {2}ID +the thing\n {2}\[?PART/);
    expect(h).toMatch(/--as FMT +format \(default: text\)/);
    expect(h).toMatch(/-h, --help +print this help/);
    expect(h).toMatch(/settings \(env\):\n {2}THINGS_URL +where things are/);
    expect(h).toMatch(/example:\n {2}apphost things get 1 --deep$/);
  });
});
