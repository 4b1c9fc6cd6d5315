/**
 * A command that talks to a running apphost: parses its spec (plus the connection flags and --json),
 * answers --help, resolves the connection lazily and hands the command a ready API client.
 */

import { type CommandSpec, type FlagSpec, parseOrHelp } from '../shared/cli/command.ts';
import { type ApiClient, createApiClient } from './api-client.ts';
import type { CommandIo, Runner } from './commands.ts';
import {
  API_URL_FLAGS,
  CONNECTION_FLAGS,
  CONNECTION_SETTINGS,
  cliTimeoutMs,
  JSON_FLAG,
  resolveConnection,
} from './connection.ts';

export interface ClientContext {
  io: CommandIo;
  env: NodeJS.ProcessEnv;
  values: Record<string, string | boolean | undefined>;
  args: Record<string, string | undefined>;
  json: boolean;
  signal: AbortSignal;
  /** Resolves base URL, project and token (flags, env, config file) on first use. */
  client(): ApiClient;
  now(): number;
}

export interface ClientCommandSpec extends CommandSpec {
  /** Adds --api-url and --run-token (commands that call the run API). */
  runApi?: boolean;
}

/** The spec with the shared connection flags, --json and the connection settings added. */
export function withConnection(spec: ClientCommandSpec): CommandSpec {
  const flags: Record<string, FlagSpec> = {
    ...spec.flags,
    ...JSON_FLAG,
    ...CONNECTION_FLAGS,
    ...(spec.runApi ? API_URL_FLAGS : {}),
  };
  const connection = CONNECTION_SETTINGS.filter(
    (c) => spec.runApi || (c.name !== 'APPHOST_API_URL' && c.name !== 'APPHOST_RUN_TOKEN'),
  );
  return { ...spec, flags, settings: [...(spec.settings ?? []), ...connection] };
}

export function clientCommand(
  spec: ClientCommandSpec,
  run: (ctx: ClientContext) => Promise<number | undefined>,
): { spec: CommandSpec; run: Runner } {
  const full = withConnection(spec);
  return {
    spec: full,
    run: async (argv, env, io) => {
      const parsed = parseOrHelp(full, argv, io);
      if (!parsed) return 0;
      let client: ApiClient | undefined;
      const signal = io.signal ?? new AbortController().signal;
      const ctx: ClientContext = {
        io,
        env,
        values: parsed.values,
        args: parsed.args,
        json: parsed.values.json === true,
        signal,
        now: () => Date.now(),
        client() {
          client ??= createApiClient({
            conn: resolveConnection(parsed.values, env),
            timeoutMs: cliTimeoutMs(env),
            signal,
          });
          return client;
        },
      };
      return (await run(ctx)) ?? 0;
    },
  };
}
