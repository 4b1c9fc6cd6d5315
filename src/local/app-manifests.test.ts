import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadAppsFolder, ManifestError } from './app-manifests.ts';

const app = (name: string, extra = '') =>
  `apiVersion: apphost.dev/v1alpha1\nkind: App\nmetadata:\n  name: ${name}\nspec:\n  runtime: cortex\n${extra}`;
const toml = (name: string, extra = '') => `[app]\nname = "${name}"\n${extra}`;

describe('loadAppsFolder', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'apphost-apps-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const put = (path: string, text: string) => {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  };

  it('reads the example apps', () => {
    const { apps, domains } = loadAppsFolder(resolve('examples/apps'));
    expect(apps.map((a) => a.name)).toEqual(['hello', 'slow', 'stream']);
    expect(apps.find((a) => a.name === 'slow')?.gracePeriodSeconds).toBe(120);
    expect(domains.map((d) => [d.metadata.name, d.spec.hostname, d.spec.appName])).toEqual([
      ['hello-local', 'hello.localhost', 'hello'],
    ]);
  });

  it('reads apphost.toml: settings map onto the App, the grace period from response_grace_period', () => {
    put(
      'a/apphost.toml',
      toml('a', '[app.scaling]\nresponse_grace_period = 30\n[app.env]\nGREETING = "hi"\n'),
    );
    put('a/main.py', 'def run(): return 1\n');
    const [a] = loadAppsFolder(dir).apps;
    expect(a?.gracePeriodSeconds).toBe(30);
    expect(a?.manifest.spec).toEqual({
      runtime: 'cortex',
      env: [{ name: 'GREETING', value: 'hi' }],
      responseGracePeriodSeconds: 30,
    });
    expect(a?.file).toBe(join(dir, 'a', 'apphost.toml'));
  });

  it.each([
    [
      'a name that is not its folder',
      toml('b'),
      /apphost\.toml: app.name 'b' must match its folder name 'a'/,
    ],
    [
      'an unknown key',
      toml('a', '[app.scaling]\nmin_replica = 1\n'),
      /app\.scaling\.min_replica: unknown key/,
    ],
    [
      'a bad value',
      toml('a', '[app.scaling]\nresponse_grace_period = 0\n'),
      /response_grace_period: must be an integer from 1 to 43200/,
    ],
    ['broken TOML', '[app\n', /apphost\.toml:1:\d+: invalid TOML/],
    [
      'a custom app without an entrypoint',
      toml('a', '[app.runtime.custom]\nport = 9000\n'),
      /app\.runtime\.custom\.entrypoint is required in local mode/,
    ],
  ])('rejects apphost.toml with %s, naming the file and key', (_what, text, message) => {
    put('a/apphost.toml', text);
    put('a/main.py', 'def run(): return 1\n');
    expect(() => loadAppsFolder(dir)).toThrow(ManifestError);
    expect(() => loadAppsFolder(dir)).toThrow(message);
  });

  it('still reads a deprecated app.yaml, warning with the same settings as apphost.toml', () => {
    put('a/app.yaml', app('a', '  responseGracePeriodSeconds: 45\n'));
    put('a/main.py', '');
    const warnings: string[] = [];
    const [a] = loadAppsFolder(dir, (m) => warnings.push(m)).apps;
    expect(a?.gracePeriodSeconds).toBe(45);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('app.yaml is deprecated');
    expect(warnings[0]).toContain('[app.scaling]\nresponse_grace_period = 45');
  });

  it('refuses a folder with both apphost.toml and app.yaml', () => {
    put('a/app.yaml', app('a'));
    put('a/apphost.toml', toml('a'));
    put('a/main.py', '');
    expect(() => loadAppsFolder(dir)).toThrow(/has both apphost.toml and app.yaml/);
  });

  it('defaults the grace period and ignores folders without an app file', () => {
    put('a/app.yaml', app('a'));
    put('a/main.py', 'def run(): return 1\n');
    put('__pycache__/x.pyc', '');
    const { apps, domains } = loadAppsFolder(dir);
    expect(apps.map((a) => [a.name, a.gracePeriodSeconds])).toEqual([['a', 900]]);
    expect(domains).toEqual([]);
  });

  it.each([
    ['a wrong kind', app('a').replace('kind: App', 'kind: Pod'), /a\/app\.yaml: not a valid App: kind/],
    ['a name that is not its folder', app('b'), /metadata.name 'b' must match its folder name 'a'/],
    ['an unknown runtime', app('a').replace('cortex', 'java'), /spec.runtime/],
    [
      'a grace period over 12 h',
      app('a', '  responseGracePeriodSeconds: 50000\n'),
      /responseGracePeriodSeconds/,
    ],
    ['broken YAML', 'kind: [', /invalid YAML/],
    [
      'a target utilization over 100 %',
      app('a', '  scaling:\n    targetUtilization: 150\n'),
      /spec\.scaling\.targetUtilization: Too big/,
    ],
    [
      'minReplicas above maxReplicas',
      app('a', '  scaling:\n    minReplicas: 3\n    maxReplicas: 2\n'),
      /spec\.scaling\.minReplicas: minReplicas must not be greater than maxReplicas/,
    ],
    [
      'an unknown scaling field',
      app('a', '  scaling:\n    cooldown: 30\n'),
      /spec\.scaling: Unrecognized key: "cooldown"/,
    ],
  ])('rejects %s with the file and field named', (_what, text, message) => {
    put('a/app.yaml', text);
    put('a/main.py', 'def run(): return 1\n');
    expect(() => loadAppsFolder(dir)).toThrow(ManifestError);
    expect(() => loadAppsFolder(dir)).toThrow(message);
  });

  it('rejects a cortex app without main.py', () => {
    put('a/app.yaml', app('a'));
    expect(() => loadAppsFolder(dir)).toThrow(/needs a main.py/);
  });

  it('rejects a domain of an unknown app and a hostname claimed twice', () => {
    put('a/app.yaml', app('a'));
    put('a/main.py', '');
    const da = (name: string, host: string, appName: string) =>
      `apiVersion: apphost.dev/v1alpha1\nkind: DomainAssignment\nmetadata:\n  name: ${name}\nspec:\n  hostname: ${host}\n  appName: ${appName}\n`;
    put('domains.yaml', da('d1', 'x.localhost', 'nope'));
    expect(() => loadAppsFolder(dir)).toThrow(/names unknown app 'nope'/);
    put('domains.yaml', `${da('d1', 'x.localhost', 'a')}---\n${da('d2', 'x.localhost', 'a')}`);
    expect(() => loadAppsFolder(dir)).toThrow(/claimed twice/);
  });

  it('names a missing folder', () => {
    expect(() => loadAppsFolder(join(dir, 'nope'))).toThrow(/apps folder does not exist/);
  });
});
