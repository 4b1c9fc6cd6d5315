import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { bool, deprecatedSettings, int, readEnv, SettingsError, text } from './settings.ts';

const Schema = z.object({
  A_MS: int(100, { min: 1 }),
  B: bool(false),
  C: text('c'),
  APPHOST_PLATFORM_KEY: z.string().min(16, 'must be at least 16 characters'),
});

describe('readEnv', () => {
  it('applies the defaults', () => {
    expect(readEnv('test', Schema, { APPHOST_PLATFORM_KEY: 'k'.repeat(16) })).toEqual({
      A_MS: 100,
      B: false,
      C: 'c',
      APPHOST_PLATFORM_KEY: 'k'.repeat(16),
    });
  });

  it('reports every bad variable at once, by name and value, never a secret value', () => {
    let err: unknown;
    try {
      readEnv('test', Schema, { A_MS: '0', B: 'yes', APPHOST_PLATFORM_KEY: 'short-secret' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SettingsError);
    const problems = (err as SettingsError).problems;
    expect(problems.map((p) => p.variable).sort()).toEqual(['APPHOST_PLATFORM_KEY', 'A_MS', 'B']);
    expect((err as Error).message).toMatch(/^invalid test settings: /);
    expect((err as Error).message).toContain("A_MS: Too small: expected number to be >=1 ('0')");
    expect((err as Error).message).toMatch(/B: Invalid option: .* \('yes'\)/);
    expect((err as Error).message).toContain('APPHOST_PLATFORM_KEY: must be at least 16 characters (set)');
    expect((err as Error).message).not.toContain('short-secret');
  });

  it('reads a renamed variable under its old name, converted, unless the new one is set', () => {
    const renamed = { OLD_SECONDS: { name: 'A_MS', scale: 1000 } };
    const key = { APPHOST_PLATFORM_KEY: 'k'.repeat(16) };
    expect(readEnv('test', Schema, { ...key, OLD_SECONDS: '3' }, renamed).A_MS).toBe(3000);
    expect(readEnv('test', Schema, { ...key, OLD_SECONDS: '3', A_MS: '7' }, renamed).A_MS).toBe(7);
    expect(deprecatedSettings({ OLD_SECONDS: '3' }, renamed)).toEqual([
      'OLD_SECONDS is deprecated: use A_MS (×1000)',
    ]);
    expect(deprecatedSettings({}, renamed)).toEqual([]);
  });
});
