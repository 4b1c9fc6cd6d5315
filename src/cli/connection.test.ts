import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CliError } from '../shared/cli/command.ts';
import { ConfigFileError, configPath, readConfig, saveProfile } from '../shared/cli/config-file.ts';
import { resolveConnection } from './connection.ts';

const dir = mkdtempSync(join(tmpdir(), 'apphost-cli-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('config file', () => {
  it('lives at APPHOST_CONFIG, else under XDG_CONFIG_HOME, else ~/.config', () => {
    expect(configPath({ APPHOST_CONFIG: '/x/c.json', XDG_CONFIG_HOME: '/y' })).toBe('/x/c.json');
    expect(configPath({ XDG_CONFIG_HOME: '/y' })).toBe('/y/apphost/config.json');
    expect(configPath({ HOME: '/h' })).toBe('/h/.config/apphost/config.json');
  });

  it('saves a profile with mode 0600, merges it and makes it current', () => {
    const file = join(dir, 'sub', 'config.json');
    saveProfile(file, 'a', { base_url: 'http://a', project: 'p', token: 't1' });
    saveProfile(file, 'b', { base_url: 'http://b', project: 'q', token: 't2' });
    saveProfile(file, 'a', { token: 't3' });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const c = readConfig(file);
    expect(c.current).toBe('a');
    expect(c.profiles.a).toEqual({ base_url: 'http://a', project: 'p', token: 't3' });
    expect(c.profiles.b?.token).toBe('t2');
  });

  it('names the file and the problem when it is not a config', () => {
    const file = join(dir, 'bad.json');
    writeFileSync(file, '{"profiles": {"a": {"token": 3}}}');
    expect(() => readConfig(file)).toThrow(ConfigFileError);
    expect(() => readConfig(file)).toThrow(/bad\.json is not an apphost config: profiles\.a\.token/);
    writeFileSync(file, '{');
    expect(() => readConfig(file)).toThrow(/is not valid JSON/);
  });
});

describe('resolveConnection', () => {
  const file = join(dir, 'resolve.json');
  saveProfile(file, 'other', { base_url: 'http://other:1', project: 'o', token: 'to' });
  saveProfile(file, 'local', {
    base_url: 'http://127.0.0.1:8081/',
    api_url: 'http://127.0.0.1:8080',
    project: 'local',
    token: 'tl',
  });
  const env = { APPHOST_CONFIG: file };

  it('takes each value from the flag, else the env, else the current profile', () => {
    expect(resolveConnection({}, env)).toMatchObject({
      baseUrl: 'http://127.0.0.1:8081',
      apiUrl: 'http://127.0.0.1:8080',
      project: 'local',
      token: 'tl',
      profile: 'local',
    });
    expect(
      resolveConnection({ project: 'flag' }, { ...env, APPHOST_PROJECT: 'env', APPHOST_TOKEN: 'te' }),
    ).toMatchObject({
      project: 'flag',
      token: 'te',
      baseUrl: 'http://127.0.0.1:8081',
    });
  });

  it('uses the profile --profile or APPHOST_PROFILE names, and says which exist when it does not', () => {
    expect(resolveConnection({ profile: 'other' }, env).baseUrl).toBe('http://other:1');
    expect(resolveConnection({}, { ...env, APPHOST_PROFILE: 'other' }).project).toBe('o');
    expect(() => resolveConnection({ profile: 'nope' }, env)).toThrow(/no profile 'nope'/);
    try {
      resolveConnection({ profile: 'nope' }, env);
    } catch (err) {
      expect((err as CliError).hint).toMatch(/known profiles: other, local/);
    }
  });

  it('names every missing value and how to provide it', () => {
    const e = (() => {
      try {
        resolveConnection({}, { APPHOST_CONFIG: join(dir, 'none.json'), APPHOST_BASE_URL: 'http://x' });
      } catch (err) {
        return err as CliError;
      }
    })();
    expect(e).toBeInstanceOf(CliError);
    expect(e?.message).toMatch(
      /no project \(--project, APPHOST_PROJECT\), token \(--token, APPHOST_TOKEN\) and no config file/,
    );
    expect(e?.hint).toMatch(/apphost dev.*apphost login/);
  });

  it('refuses a base URL that is not http(s)', () => {
    expect(() => resolveConnection({ 'base-url': 'ftp://x' }, env)).toThrow(/not an http\(s\) URL/);
  });

  it('never writes the file when only reading', () => {
    const before = readFileSync(file, 'utf8');
    resolveConnection({ project: 'x' }, env);
    expect(readFileSync(file, 'utf8')).toBe(before);
  });
});
