/** `apphost init NAME [DIR]`: a new app folder — main.py, apphost.toml and .gitignore — ready to deploy. */
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { AppSection } from '../apis/v1alpha1/app-config.ts';
import { CliError, type CommandSpec, parseOrHelp, UsageError } from '../shared/cli/command.ts';
import type { CommandIo } from './commands.ts';

export const INIT_SPEC: CommandSpec = {
  name: 'init',
  summary:
    'Create an app folder (main.py, apphost.toml, .gitignore) that apphost deploy can deploy as it is.',
  description: 'It needs no server and reads no settings (env). The folder must not exist yet, or be empty.',
  args: [
    { name: 'NAME', description: 'the app name: lowercase letters, digits and -, starting with a letter' },
    { name: 'DIR', description: 'the folder to create (default: ./NAME)', optional: true },
  ],
  examples: ['apphost init hello && cd hello && apphost deploy', 'apphost init shop-api services/shop'],
};

export const MAIN_PY = `"""The functions of this file are your app's endpoints: POST /v4/<project>/<app>/<function>.

The JSON body of a call is passed as keyword arguments; the return value is the JSON answer.
A generator function streams its values as server-sent events (call it with Accept: text/event-stream).
"""


def run(name: str = "world") -> dict:
    return {"message": f"hello {name}"}
`;

export function appConfigText(name: string): string {
  return `# The app's configuration: every key is in docs/apphost-toml.md (and schemas/apphost.schema.json).
[app]
name = "${name}"
# python_version = "3.11"
# include = ["**"]                          # files to deploy (globs)
# exclude = [".*", "__pycache__", "*.pyc"]  # files left out

[app.scaling]
# min_replicas = 1
# max_replicas = 10
# replica_concurrency = 100
response_grace_period = 900                 # seconds a call may take (at most 43200)

# [app.dependencies]
# pip = { requests = ">=2.31" }             # or a requirements.txt beside main.py

# [app.env]
# GREETING = "hi"
`;
}

export const GITIGNORE = `__pycache__/
*.pyc
.venv/
.apphost/
`;

export async function runInitCommand(
  argv: string[],
  _env: NodeJS.ProcessEnv,
  io: CommandIo,
): Promise<number> {
  const parsed = parseOrHelp(INIT_SPEC, argv, io);
  if (!parsed) return 0;
  const name = parsed.args.NAME ?? '';
  const check = AppSection.shape.name.safeParse(name);
  if (!check.success)
    throw new UsageError(`NAME '${name}' ${check.error.issues[0]?.message ?? 'is not valid'}`);
  const dir = resolve(parsed.args.DIR ?? name);
  if (existsSync(dir) && readdirSync(dir).length > 0)
    throw new CliError(
      `${dir} exists and is not empty`,
      'choose another folder, or add apphost.toml there by hand',
    );
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'main.py'), MAIN_PY);
  writeFileSync(join(dir, 'apphost.toml'), appConfigText(name));
  writeFileSync(join(dir, '.gitignore'), GITIGNORE);
  const shown = relative(process.cwd(), dir) || '.';
  io.out(`created ${shown}/ with main.py, apphost.toml and .gitignore`);
  io.out(`next: cd ${shown} && apphost deploy`);
  return 0;
}
