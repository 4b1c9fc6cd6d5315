import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRunTokenVerifier, issueRunToken } from '../shared/run-tokens.ts';
import { loadOrCreateState, PLATFORM_KEY_FILE, RUN_TOKEN_KEYS_FILE } from './state.ts';

describe('loadOrCreateState', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'apphost-state-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('generates owner-only keys once and reads the same ones back, so old tokens stay valid', async () => {
    const first = await loadOrCreateState(join(dir, 's'));
    for (const f of [RUN_TOKEN_KEYS_FILE, PLATFORM_KEY_FILE])
      expect(statSync(join(dir, 's', f)).mode & 0o777).toBe(0o600);
    expect(first.platformKey.length).toBeGreaterThanOrEqual(32);
    const token = await issueRunToken(first.keySet, 'local', new Date(Date.now() + 60_000));
    const second = await loadOrCreateState(join(dir, 's'));
    expect(second.platformKey).toBe(first.platformKey);
    expect(second.keySet).toEqual(first.keySet);
    expect((await createRunTokenVerifier(() => second.keySet)(token)).projectId).toBe('local');
  });

  it('names a corrupt key file instead of silently replacing it', async () => {
    await loadOrCreateState(dir);
    writeFileSync(join(dir, RUN_TOKEN_KEYS_FILE), '{"keys": []}');
    await expect(loadOrCreateState(dir)).rejects.toThrow(/run-token-keys.json: not a run-token key set/);
    writeFileSync(join(dir, RUN_TOKEN_KEYS_FILE), 'nope');
    await expect(loadOrCreateState(dir)).rejects.toThrow(/not JSON/);
    expect(readFileSync(join(dir, RUN_TOKEN_KEYS_FILE), 'utf8')).toBe('nope');
  });
});
