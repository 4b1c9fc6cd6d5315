import { describe, expect, it } from 'vitest';
import { parseAppConfig } from '../apis/v1alpha1/app-config.ts';
import { assembleRequirements, type BuildTarget, dependencyKey } from './requirements.ts';

const target: BuildTarget = { pythonVersion: '3.11', platform: 'linux-x86_64', runtime: 'img:1' };
const config = (deps = '') => parseAppConfig(`[app]\nname = "a"\n${deps}`);

describe('assembleRequirements', () => {
  it('takes the file (comments, blanks and continuations handled) then the pip table', () => {
    const r = assembleRequirements(config('[app.dependencies.pip]\nnumpy = "*"\nrequests = ">=2,<3"\n'), {
      path: 'requirements.txt',
      text: '# top\n\nflask==3.0 # web\nhttpx \\\n  >=0.27\n',
    });
    expect(r.text).toBe('flask==3.0\nhttpx   >=0.27\nnumpy\nrequests>=2,<3\n');
    expect(r.localPaths).toEqual(['requirements.txt']);
  });

  it('finds the bundle paths the lines refer to: option paths from the file, requirement paths from the root', () => {
    const r = assembleRequirements(config(), {
      path: 'deps/requirements.txt',
      text: '-f wheels\n--find-links=more\n-r base.txt\n./pkgs/a-1.0-py3-none-any.whl\nb @ file:vendor/b\nc==1 ; sys_platform=="linux"\n--index-url https://example.org/simple\n-f /abs/wheels\n',
    });
    expect(r.localPaths).toEqual([
      'deps/base.txt',
      'deps/more',
      'deps/requirements.txt',
      'deps/wheels',
      'pkgs/a-1.0-py3-none-any.whl',
      'vendor/b',
    ]);
  });

  it('no requirements: empty text', () => {
    expect(assembleRequirements(config(), undefined)).toEqual({ text: '', localPaths: [] });
  });
});

describe('dependencyKey', () => {
  const reqs = assembleRequirements(config(), { path: 'requirements.txt', text: '-f wheels\nmylib==0.1\n' });
  const files = new Map([
    ['requirements.txt', 'r1'],
    ['wheels/mylib-0.1-py3-none-any.whl', 'w1'],
    ['main.py', 'm1'],
  ]);
  const key = dependencyKey(target, reqs, files);

  it('is stable and ignores files the requirements do not name (a code change reuses the set)', () => {
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(dependencyKey(target, reqs, new Map([...files, ['main.py', 'm2']]))).toBe(key);
  });

  it.each([
    ['another Python', { ...target, pythonVersion: '3.12' }, files],
    ['another platform', { ...target, platform: 'linux-aarch64' }, files],
    ['another runtime', { ...target, runtime: 'img:2' }, files],
    [
      'a changed wheel in the folder',
      target,
      new Map([...files, ['wheels/mylib-0.1-py3-none-any.whl', 'w2']]),
    ],
  ])('changes with %s', (_what, t, f) => {
    expect(dependencyKey(t, reqs, f)).not.toBe(key);
  });

  it('changes with the requirement lines', () => {
    const other = assembleRequirements(config(), {
      path: 'requirements.txt',
      text: '-f wheels\nmylib==0.2\n',
    });
    expect(dependencyKey(target, other, files)).not.toBe(key);
  });
});
