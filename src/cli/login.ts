/** `apphost login`: checks a base URL, project and token against the API, then saves them as a profile. */

import { CliError } from '../shared/cli/command.ts';
import { configPath, readConfig, saveProfile } from '../shared/cli/config-file.ts';
import { createApiClient } from './api-client.ts';
import { clientCommand } from './client-command.ts';
import { cliTimeoutMs, resolveConnection } from './connection.ts';
import { fields, json } from './output.ts';

export const DEFAULT_LOGIN_PROFILE = 'default';

async function readStdin(signal: AbortSignal): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) {
    if (signal.aborted) break;
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8').trim();
}

export const loginCommand = clientCommand(
  {
    name: 'login',
    summary:
      'Check a base URL, project and service-account token, and save them as a profile of the config file.',
    description:
      'Writes the profile named by --profile (default: default) and makes it the current one: later commands use it\n' +
      'when no flag or APPHOST_* variable says otherwise. Values not given are kept from that profile.\n' +
      "The token is checked with one authenticated call before anything is saved. 'apphost dev' saves the profile 'local' by itself.",
    runApi: true,
    flags: {
      'token-stdin': {
        type: 'boolean',
        description: 'read the token from standard input (keeps it out of shell history)',
      },
    },
    examples: [
      'apphost login --base-url https://apphost.example.com --project shop --token-stdin < token.txt',
      'apphost login --base-url http://127.0.0.1:8081 --api-url http://127.0.0.1:8080 --project local --token "$SA_TOKEN" --profile dev',
    ],
  },
  async (ctx) => {
    const values = { ...ctx.values };
    if (values['token-stdin']) {
      const token = await readStdin(ctx.signal);
      if (!token)
        throw new CliError('--token-stdin: standard input was empty', 'pipe the token in, e.g. < token.txt');
      values.token = token;
    }
    const name =
      typeof values.profile === 'string' && values.profile ? values.profile : DEFAULT_LOGIN_PROFILE;
    const file = configPath(ctx.env);
    const conn = resolveConnection(values, ctx.env, {
      name,
      profile: readConfig(file).profiles[name] ?? {},
      file,
    });
    const client = createApiClient({ conn, timeoutMs: cliTimeoutMs(ctx.env), signal: ctx.signal });
    const { service_accounts: accounts } = await client.json<{ service_accounts: unknown[] }>(
      client.projectPath('service-accounts'),
    );
    saveProfile(conn.configFile, name, {
      base_url: conn.baseUrl,
      project: conn.project,
      token: conn.token,
      ...(conn.apiUrl ? { api_url: conn.apiUrl } : {}),
      ...(conn.runToken ? { run_token: conn.runToken } : {}),
    });
    const summary = {
      profile: name,
      config_file: conn.configFile,
      base_url: conn.baseUrl,
      ...(conn.apiUrl ? { api_url: conn.apiUrl } : {}),
      project: conn.project,
      service_accounts: accounts.length,
    };
    ctx.io.out(
      ctx.json
        ? json(summary)
        : `${fields([
            ['profile', `${name} (now the current one)`],
            ['config file', conn.configFile],
            ['base url', conn.baseUrl],
            ['api url', conn.apiUrl ?? "(none: pass --api-url to use 'apphost run')"],
            ['project', conn.project],
          ])}\nlogged in: the token works for project ${conn.project}`,
    );
    return 0;
  },
);
