/**
 * The CLI's config file: named profiles of {base_url, api_url, project, token, run_token}, written by
 * `apphost dev` (profile `local`) and `apphost login`, read by every client command (docs/cli.md).
 * Mode 0600 (it holds tokens), replaced atomically so a reader never sees half a file.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { ConfigFileError } from './command.ts';

export const Profile = z.object({
  base_url: z.string().optional(),
  api_url: z.string().optional(),
  project: z.string().optional(),
  token: z.string().optional(),
  run_token: z.string().optional(),
});
export type Profile = z.infer<typeof Profile>;

export const ConfigFile = z.object({
  current: z.string().optional(),
  profiles: z.record(z.string(), Profile).default({}),
});
export type ConfigFile = z.infer<typeof ConfigFile>;

/** $APPHOST_CONFIG, else $XDG_CONFIG_HOME/apphost/config.json, else ~/.config/apphost/config.json. */
export function configPath(env: NodeJS.ProcessEnv): string {
  if (env.APPHOST_CONFIG) return env.APPHOST_CONFIG;
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  return join(base, 'apphost', 'config.json');
}

export { ConfigFileError };

export function readConfig(file: string): ConfigFile {
  if (!existsSync(file)) return { profiles: {} };
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigFileError(`${file} is not valid JSON (${(err as Error).message})`);
  }
  const r = ConfigFile.safeParse(raw);
  if (!r.success)
    throw new ConfigFileError(
      `${file} is not an apphost config: ${r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
    );
  return r.data;
}

/** Sets one profile (merged over what it had) and makes it the current one. */
export function saveProfile(file: string, name: string, profile: Profile): void {
  const config = readConfig(file);
  config.profiles[name] = { ...config.profiles[name], ...profile };
  config.current = name;
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
}
