import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Raw, rawTarGz } from '../../test/harness/tarball.ts';
import { parseAppConfig } from '../apis/v1alpha1/app-config.ts';
import { type ArchiveLimits, extractArchive } from './archive.ts';
import { BundleError, DEFAULT_BUNDLE_LIMITS, inspectBundle, packBundle } from './bundle.ts';

const limits = DEFAULT_BUNDLE_LIMITS;

const TOML = '[app]\nname = "hello"\n';
const MAIN = 'def run():\n    return 1\n';

async function problemOf(
  p: Promise<unknown>,
): Promise<{ problem: string; message: string; path?: string | undefined }> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(BundleError);
    const e = err as BundleError;
    return { problem: e.problem, message: e.message, path: e.path };
  }
  throw new Error('expected a BundleError');
}

describe('packBundle', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'apphost-bundle-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const put = (path: string, text = 'x') => {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  };

  it('bundles the folder by include/exclude (defaults leave out dotfiles and Python caches)', async () => {
    put('apphost.toml', TOML);
    put('main.py', MAIN);
    put('lib/util.py');
    put('lib/__pycache__/util.cpython-311.pyc');
    put('.git/HEAD');
    put('.env');
    put('notes.pyc');
    const b = await packBundle(dir, parseAppConfig(TOML), limits);
    expect(b.paths).toEqual(['apphost.toml', 'lib/util.py', 'main.py']);
  });

  it('honours include and exclude, and always bundles apphost.toml and the requirements file', async () => {
    const toml = '[app]\nname = "hello"\ninclude = ["*.py"]\nexclude = ["secret*", "data/"]\n';
    put('apphost.toml', toml);
    put('main.py', MAIN);
    put('secret.py');
    put('lib/deep.py');
    put('requirements.txt', 'requests\n');
    put('README.md');
    const b = await packBundle(dir, parseAppConfig(toml), limits);
    expect(b.paths).toEqual(['apphost.toml', 'main.py', 'requirements.txt']);
    const deep = '[app]\nname = "hello"\ninclude = ["**/*.py"]\nexclude = ["lib"]\n';
    put('apphost.toml', deep);
    put('other/lib/x.py');
    expect((await packBundle(dir, parseAppConfig(deep), limits)).paths).toEqual([
      'apphost.toml',
      'main.py',
      'requirements.txt',
      'secret.py',
    ]);
  });

  it('is deterministic: same files, same sha256, whatever their times', async () => {
    put('apphost.toml', TOML);
    put('main.py', MAIN);
    const a = await packBundle(dir, parseAppConfig(TOML), limits);
    utimesSync(join(dir, 'main.py'), new Date(2001, 1, 1), new Date(2001, 1, 1));
    const b = await packBundle(dir, parseAppConfig(TOML), limits);
    expect(b.digest).toBe(a.digest);
    expect(a.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    put('main.py', `${MAIN}# changed\n`);
    expect((await packBundle(dir, parseAppConfig(TOML), limits)).digest).not.toBe(a.digest);
  });

  it('keeps a symlink inside the folder and refuses one that points out, directly or through another', async () => {
    put('apphost.toml', TOML);
    put('main.py', MAIN);
    put('data/a.txt', 'A');
    symlinkSync('data/a.txt', join(dir, 'alias.txt'));
    const b = await packBundle(dir, parseAppConfig(TOML), limits);
    expect(b.paths).toContain('alias.txt');

    symlinkSync('/etc/passwd', join(dir, 'passwd'));
    expect(await problemOf(packBundle(dir, parseAppConfig(TOML), limits))).toMatchObject({
      problem: 'symlink_out',
      path: 'passwd',
    });
    rmSync(join(dir, 'passwd'));
    const outside = mkdtempSync(join(tmpdir(), 'apphost-outside-'));
    try {
      symlinkSync(outside, join(dir, 'hop'));
      expect((await problemOf(packBundle(dir, parseAppConfig(TOML), limits))).problem).toBe('symlink_out');
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('stops at the size and file-count bounds', async () => {
    put('apphost.toml', TOML);
    put('main.py', MAIN);
    put('big.bin', 'x'.repeat(5000));
    const small: ArchiveLimits = { maxBytes: 1 << 20, maxUnpackedBytes: 4000, maxFiles: 10 };
    expect((await problemOf(packBundle(dir, parseAppConfig(TOML), small))).problem).toBe('too_large');
    expect(
      (
        await problemOf(
          packBundle(dir, parseAppConfig(TOML), { ...small, maxUnpackedBytes: 1 << 20, maxFiles: 2 }),
        )
      ).problem,
    ).toBe('too_many_files');
  });

  it('round-trips through extractArchive: content, modes and symlinks', async () => {
    put('apphost.toml', TOML);
    put('main.py', MAIN);
    put('bin/tool.sh', '#!/bin/sh\n');
    const { chmodSync } = await import('node:fs');
    chmodSync(join(dir, 'bin/tool.sh'), 0o755);
    symlinkSync('bin/tool.sh', join(dir, 'tool'));
    const b = await packBundle(dir, parseAppConfig(TOML), limits);
    const out = mkdtempSync(join(tmpdir(), 'apphost-out-'));
    try {
      await extractArchive(b.data, join(out, 'x'), limits);
      expect(readFileSync(join(out, 'x/main.py'), 'utf8')).toBe(MAIN);
      expect(statSync(join(out, 'x/bin/tool.sh')).mode & 0o777).toBe(0o755);
      expect(statSync(join(out, 'x/main.py')).mode & 0o777).toBe(0o644);
      expect(readlinkSync(join(out, 'x/tool'))).toBe('bin/tool.sh');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

describe('inspectBundle (what the management API accepts)', () => {
  const good: Raw[] = [
    { name: 'apphost.toml', content: TOML },
    { name: 'main.py', content: MAIN },
  ];

  it('accepts a good bundle and reads its config and requirements', async () => {
    const toml = '[app]\nname = "hello"\n[app.dependencies]\npip = { mylib = "==0.1.0" }\n';
    const data = await rawTarGz([
      { name: 'apphost.toml', content: toml },
      { name: 'main.py', content: MAIN },
      { name: 'requirements.txt', content: '# deps\nrequests>=2 \\\n  ; python_version>"3"\n-f wheels\n' },
      { name: 'wheels/mylib-0.1.0-py3-none-any.whl', content: 'PK' },
    ]);
    const b = await inspectBundle(data, limits);
    expect(b.config.app.name).toBe('hello');
    expect(b.requirements.text).toBe('requests>=2   ; python_version>"3"\n-f wheels\nmylib==0.1.0\n');
    expect(b.requirements.localPaths).toEqual(['requirements.txt', 'wheels']);
    expect(b.fileDigests.get('main.py')).toMatch(/^[0-9a-f]{64}$/);
    expect(b.files).toBe(4);
  });

  it.each<[string, Raw[] | 'not-gzip' | 'gzip-not-tar', string, RegExp]>([
    ['an absolute path', [...good, { name: '/etc/cron.d/x' }], 'unsafe_path', /absolute path/],
    ['a path that escapes with ..', [...good, { name: 'lib/../../x' }], 'unsafe_path', /escapes the folder/],
    [
      'a symlink out',
      [...good, { name: 'x', type: 'symlink', linkname: '../../etc/passwd' }],
      'symlink_out',
      /points outside/,
    ],
    [
      'an absolute symlink',
      [...good, { name: 'x', type: 'symlink', linkname: '/etc/passwd' }],
      'symlink_out',
      /points outside/,
    ],
    [
      'a file written through a symlink',
      [...good, { name: 'lib', type: 'symlink', linkname: 'sub' }, { name: 'lib/x.py' }],
      'symlink_out',
      /through the symlink lib/,
    ],
    [
      'a hard link',
      [...good, { name: 'h', type: 'link', linkname: 'main.py' }],
      'unsupported_entry',
      /a link entry/,
    ],
    ['a device', [...good, { name: 'd', type: 'character-device' }], 'unsupported_entry', /character-device/],
    [
      'a duplicate entry',
      [...good, { name: 'main.py', content: 'evil' }],
      'duplicate_entry',
      /appears twice/,
    ],
    ['data that is not gzip', 'not-gzip', 'not_an_archive', /not a gzip-compressed tar/],
    ['gzip that is not tar', 'gzip-not-tar', 'not_an_archive', /not a gzip-compressed tar/],
    ['no apphost.toml', [{ name: 'main.py', content: MAIN }], 'missing_file', /apphost\.toml is missing/],
    [
      'no main.py for cortex',
      [{ name: 'apphost.toml', content: TOML }],
      'missing_file',
      /main\.py is missing/,
    ],
    [
      'apphost.toml as a symlink',
      [
        { name: 'real.toml', content: TOML },
        { name: 'apphost.toml', type: 'symlink', linkname: 'real.toml' },
        { name: 'main.py', content: MAIN },
      ],
      'missing_file',
      /symlink, not a file/,
    ],
    [
      'a bad apphost.toml',
      [
        { name: 'apphost.toml', content: '[app]\nname = "x"\n[app.scaling]\nmin_replica = 1\n' },
        { name: 'main.py', content: MAIN },
      ],
      'invalid_config',
      /app\.scaling\.min_replica: unknown key/,
    ],
    [
      'a named requirements file that is missing',
      [
        {
          name: 'apphost.toml',
          content: '[app]\nname = "x"\n[app.dependencies]\nrequirements = "deps.txt"\n',
        },
        { name: 'main.py', content: MAIN },
      ],
      'missing_file',
      /deps\.txt is missing/,
    ],
    [
      'requirements that point outside the folder',
      [...good, { name: 'requirements.txt', content: '-f ../../wheels\n' }],
      'unsafe_path',
      /outside the app folder/,
    ],
  ])('refuses %s', async (_what, entries, problem, message) => {
    const data =
      entries === 'not-gzip'
        ? Buffer.from('hello, not an archive')
        : entries === 'gzip-not-tar'
          ? gzipSync(Buffer.from('x'.repeat(2000)))
          : await rawTarGz(entries);
    const p = await problemOf(inspectBundle(data, limits));
    expect(p.problem).toBe(problem);
    expect(p.message).toMatch(message);
  });

  it('stops a decompression bomb at the unpacked bound without unpacking it all', async () => {
    const data = await rawTarGz([...good, { name: 'zeros', content: '\0'.repeat(3_000_000) }]);
    expect(data.length).toBeLessThan(100_000);
    const p = await problemOf(inspectBundle(data, { ...limits, maxUnpackedBytes: 1_000_000 }));
    expect(p).toMatchObject({ problem: 'too_large' });
    expect(p.message).toMatch(/unpacked/);
  });

  it('refuses a bundle over the compressed bound and one with too many files', async () => {
    const data = await rawTarGz(good);
    expect((await problemOf(inspectBundle(data, { ...limits, maxBytes: 10 }))).problem).toBe('too_large');
    expect((await problemOf(inspectBundle(data, { ...limits, maxFiles: 1 }))).problem).toBe('too_many_files');
  });
});
