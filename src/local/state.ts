/**
 * Local mode's generated secrets, kept in the state folder (.apphost/) so tokens printed by one run
 * stay valid in the next: the run-token key set and the platform (secretbox) key.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateSigningKey, type KeySet } from '../shared/run-tokens.ts';

export const RUN_TOKEN_KEYS_FILE = 'run-token-keys.json';
export const PLATFORM_KEY_FILE = 'platform-key';

export interface LocalState {
  dir: string;
  keySet: KeySet;
  keySetFile: string;
  platformKey: string;
}

/** Writes via a temp file and rename, owner-only, so a crash never leaves half a key. */
export function writeSecretFile(file: string, content: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, content, { mode: 0o600 });
  renameSync(tmp, file);
  chmodSync(file, 0o600);
}

function isKeySet(v: unknown): v is KeySet {
  const keys = (v as { keys?: unknown })?.keys;
  return (
    Array.isArray(keys) &&
    keys.length > 0 &&
    keys.every(
      (k) => typeof k?.kid === 'string' && typeof k?.privateJwk === 'object' && k.privateJwk !== null,
    )
  );
}

export async function loadOrCreateState(dir: string): Promise<LocalState> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const keySetFile = join(dir, RUN_TOKEN_KEYS_FILE);
  let keySet: KeySet;
  if (existsSync(keySetFile)) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(keySetFile, 'utf8'));
    } catch (err) {
      throw new Error(
        `${keySetFile}: not JSON (${(err as Error).message}); delete it to generate a new key set`,
      );
    }
    if (!isKeySet(parsed))
      throw new Error(`${keySetFile}: not a run-token key set; delete it to generate a new one`);
    keySet = parsed;
  } else {
    keySet = { keys: [await generateSigningKey()] };
    writeSecretFile(keySetFile, `${JSON.stringify(keySet, null, 2)}\n`);
  }
  const platformKeyFile = join(dir, PLATFORM_KEY_FILE);
  let platformKey: string;
  if (existsSync(platformKeyFile)) {
    platformKey = readFileSync(platformKeyFile, 'utf8').trim();
    if (platformKey.length < 16)
      throw new Error(`${platformKeyFile}: too short; delete it to generate a new key`);
  } else {
    platformKey = randomBytes(32).toString('base64');
    writeSecretFile(platformKeyFile, `${platformKey}\n`);
  }
  return { dir, keySet, keySetFile, platformKey };
}
