import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { appOfChange, watchApps } from './watcher.ts';

describe('appOfChange', () => {
  it.each([
    ['hello/main.py', 'hello'],
    ['hello/lib/util.py', 'hello'],
    ['hello/app.yaml', 'hello'],
    ['domains.yaml', undefined],
    ['hello', undefined],
    ['hello/__pycache__/main.cpython-311.pyc', undefined],
    ['hello/.main.py.swp', undefined],
    ['hello/main.py~', undefined],
  ])('%s -> %s', (path, want) => {
    expect(appOfChange(path)).toBe(want);
  });
});

describe('watchApps (real fs.watch)', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('reports the changed app once per burst of writes, and never the others', async () => {
    dir = mkdtempSync(join(tmpdir(), 'apphost-watch-'));
    for (const app of ['a', 'b']) {
      mkdirSync(join(dir, app));
      writeFileSync(join(dir, app, 'main.py'), 'x = 1\n');
    }
    const changes: string[] = [];
    const w = watchApps(dir, (app) => changes.push(app), { debounceMs: 150 });
    try {
      await new Promise((r) => setTimeout(r, 100));
      for (let i = 0; i < 5; i++) writeFileSync(join(dir, 'a', 'main.py'), `x = ${i}\n`);
      const deadline = Date.now() + 10_000;
      while (changes.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setTimeout(r, 400));
      expect(changes).toEqual(['a']);
    } finally {
      w.close();
    }
  });
});
