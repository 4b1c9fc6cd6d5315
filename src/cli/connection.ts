/**
 * Where a client command finds the management API, the run API, the project and the tokens. Each field
 * is looked up on its own: flag, then APPHOST_* env, then the selected profile of the config file.
 * This is the one place that rule lives (docs/cli.md).
 */
import type { FlagSpec, SettingSpec } from '../shared/cli/command.ts';
import { CliError } from '../shared/cli/command.ts';
import { configPath, type Profile, readConfig } from '../shared/cli/config-file.ts';

export interface Connection {
  /** Management API, `{base_url}`. */
  baseUrl: string;
  project: string;
  /** Service-account token. */
  token: string;
  /** Run API, `{api_url}`, when known. */
  apiUrl?: string;
  /** Run token (JWT) for the run API, when known. */
  runToken?: string;
  /** The profile the missing fields came from, for messages. */
  profile?: string;
  configFile: string;
}

export const CONNECTION_FLAGS: Record<string, FlagSpec> = {
  'base-url': { type: 'string', value: 'URL', description: 'management API, {base_url} [APPHOST_BASE_URL]' },
  project: { type: 'string', value: 'ID', description: 'project id [APPHOST_PROJECT]' },
  token: { type: 'string', value: 'TOKEN', description: 'service-account token [APPHOST_TOKEN]' },
  profile: {
    type: 'string',
    value: 'NAME',
    description: 'profile of the config file [APPHOST_PROFILE] (default: its current one)',
  },
};

export const API_URL_FLAGS: Record<string, FlagSpec> = {
  'api-url': { type: 'string', value: 'URL', description: 'run API, {api_url} [APPHOST_API_URL]' },
  'run-token': { type: 'string', value: 'TOKEN', description: 'run token [APPHOST_RUN_TOKEN]' },
};

export const JSON_FLAG: Record<string, FlagSpec> = {
  json: { type: 'boolean', description: 'print JSON for scripts instead of text' },
};

export const CONNECTION_SETTINGS: readonly SettingSpec[] = [
  { name: 'APPHOST_BASE_URL', description: 'management API, {base_url}' },
  { name: 'APPHOST_API_URL', description: 'run API, {api_url}' },
  { name: 'APPHOST_PROJECT', description: 'project id' },
  { name: 'APPHOST_TOKEN', description: 'service-account token' },
  { name: 'APPHOST_RUN_TOKEN', description: 'run token (else one is issued with the service-account token)' },
  { name: 'APPHOST_PROFILE', description: 'profile of the config file' },
  { name: 'APPHOST_CONFIG', description: 'config file (~/.config/apphost/config.json)' },
  { name: 'APPHOST_TIMEOUT_SECONDS', description: 'bound on each API call until it answers (30)' },
];

type Values = Record<string, string | boolean | undefined>;
const str = (v: string | boolean | undefined) => (typeof v === 'string' && v !== '' ? v : undefined);

/** The profile the command uses: --profile, APPHOST_PROFILE, or the file's current one. */
export function selectProfile(
  values: Values,
  env: NodeJS.ProcessEnv,
): { name?: string; profile: Profile; file: string } {
  const file = configPath(env);
  const config = readConfig(file);
  const wanted = str(values.profile) ?? str(env.APPHOST_PROFILE);
  if (wanted !== undefined) {
    const profile = config.profiles[wanted];
    if (!profile)
      throw new CliError(
        `no profile '${wanted}' in ${file}`,
        `known profiles: ${Object.keys(config.profiles).join(', ') || '(none)'}; create one with 'apphost login --profile ${wanted}'`,
      );
    return { name: wanted, profile, file };
  }
  const name = config.current;
  return { ...(name ? { name } : {}), profile: (name && config.profiles[name]) || {}, file };
}

const trimSlash = (u: string) => u.replace(/\/+$/, '');

function checkUrl(what: string, url: string): string {
  try {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('not http(s)');
  } catch {
    throw new CliError(`${what} '${url}' is not an http(s) URL`, `e.g. http://127.0.0.1:8081`);
  }
  return trimSlash(url);
}

/** `selected`: use this profile instead of the selected one (login writes a profile that may not exist yet). */
export function resolveConnection(
  values: Values,
  env: NodeJS.ProcessEnv,
  selected?: { name: string; profile: Profile; file: string },
): Connection {
  const { name, profile, file } = selected ?? selectProfile(values, env);
  const pick = (flag: string, envName: string, field: keyof Profile) =>
    str(values[flag]) ?? str(env[envName]) ?? profile[field];
  const baseUrl = pick('base-url', 'APPHOST_BASE_URL', 'base_url');
  const project = pick('project', 'APPHOST_PROJECT', 'project');
  const token = pick('token', 'APPHOST_TOKEN', 'token');
  const missing = [
    ...(baseUrl ? [] : ['base URL (--base-url, APPHOST_BASE_URL)']),
    ...(project ? [] : ['project (--project, APPHOST_PROJECT)']),
    ...(token ? [] : ['token (--token, APPHOST_TOKEN)']),
  ];
  if (missing.length > 0)
    throw new CliError(
      `no ${missing.join(', ')}${name ? ` in profile '${name}' of ${file}` : ` and no config file at ${file}`}`,
      "start 'apphost dev' (it writes the profile 'local'), or run 'apphost login --base-url URL --project ID --token TOKEN'",
    );
  const apiUrl = pick('api-url', 'APPHOST_API_URL', 'api_url');
  const runToken = pick('run-token', 'APPHOST_RUN_TOKEN', 'run_token');
  return {
    baseUrl: checkUrl('base URL', baseUrl as string),
    project: project as string,
    token: token as string,
    ...(apiUrl ? { apiUrl: checkUrl('API URL', apiUrl) } : {}),
    ...(runToken ? { runToken } : {}),
    ...(name ? { profile: name } : {}),
    configFile: file,
  };
}

/** Seconds → ms of APPHOST_TIMEOUT_SECONDS (default 30), the bound on each API call until it answers. */
export const DEFAULT_CLI_TIMEOUT_SECONDS = 30;
export function cliTimeoutMs(env: NodeJS.ProcessEnv): number {
  const raw = env.APPHOST_TIMEOUT_SECONDS;
  if (raw === undefined || raw === '') return DEFAULT_CLI_TIMEOUT_SECONDS * 1000;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0)
    throw new CliError(`APPHOST_TIMEOUT_SECONDS must be a positive number, got '${raw}'`);
  return n * 1000;
}
