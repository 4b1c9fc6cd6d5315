/**
 * The layers of src/ (docs/architecture.md): a folder imports only from the folders listed for it, so
 * no import runs back up a layer. Test files are exempt (they may reach across to build fixtures).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(import.meta.dirname, '..', '..', 'src');

/** What each top-level folder of src/ may import (besides itself). */
const ALLOWED: Record<string, readonly string[]> = {
  apis: [],
  shared: ['apis'],
  webhooks: ['apis', 'shared'],
  runs: ['apis', 'shared', 'webhooks'],
  builds: ['apis', 'shared'],
  // The autoscaler's decision and loop, run by the operator (Deployments) and by apphost dev (processes).
  autoscaler: ['apis', 'shared'],
  operator: ['apis', 'shared', 'autoscaler'],
  gateway: ['apis', 'shared', 'runs', 'webhooks'],
  // The dashboard is part of the management API's server: mounted by it, built on its store and handlers.
  dashboard: ['apis', 'shared', 'management'],
  management: ['apis', 'shared', 'runs', 'webhooks', 'builds', 'dashboard'],
  local: ['apis', 'shared', 'webhooks', 'runs', 'builds', 'autoscaler', 'gateway', 'dashboard', 'management'],
  cli: [
    'apis',
    'shared',
    'webhooks',
    'runs',
    'builds',
    'autoscaler',
    'operator',
    'gateway',
    'dashboard',
    'management',
    'local',
  ],
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [p] : [];
  });
}

const IMPORT =
  /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g;

/** Every import from one top-level folder into another, as `file imports target`, with its two folders. */
function crossings(): Array<{ from: string; to: string; what: string }> {
  const found: Array<{ from: string; to: string; what: string }> = [];
  for (const file of sourceFiles(SRC)) {
    const from = relative(SRC, file).split('/')[0] ?? '';
    for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const spec = m[1] ?? m[2] ?? '';
      const target = relative(SRC, normalize(join(dirname(file), spec)));
      const to = target.split('/')[0] ?? '';
      if (target.startsWith('..') || to === from) continue;
      found.push({ from, to, what: `${relative(SRC, file)} imports ${target}` });
    }
  }
  return found;
}

describe('import direction', () => {
  it('every folder of src/ has a rule', () => {
    const folders = readdirSync(SRC, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
    expect(folders.filter((f) => !(f in ALLOWED))).toEqual([]);
  });

  it('no import runs back up a layer', () => {
    const all = crossings();
    // The scan sees static and dynamic imports (else this test could not fail).
    expect(all.some((c) => c.what === 'gateway/gateway.ts imports runs/store.ts')).toBe(true);
    expect(all.some((c) => c.what === 'cli/commands.ts imports gateway/main.ts')).toBe(true);
    expect(all.filter((c) => !(ALLOWED[c.from] ?? []).includes(c.to)).map((c) => c.what)).toEqual([]);
  });

  it("the operator's controllers share only runtime/ and the lower layers, never each other's code", () => {
    const CONTROLLERS = ['app', 'domainassignment', 'autoscaler'];
    const borrowed: string[] = [];
    for (const file of sourceFiles(join(SRC, 'operator'))) {
      const own = relative(join(SRC, 'operator'), file).split('/')[0] ?? '';
      if (!CONTROLLERS.includes(own)) continue;
      for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) {
        const target = relative(join(SRC, 'operator'), normalize(join(dirname(file), m[1] ?? m[2] ?? '')));
        const to = target.split('/')[0] ?? '';
        if (to !== own && CONTROLLERS.includes(to)) borrowed.push(`${relative(SRC, file)} imports ${target}`);
      }
    }
    expect(borrowed).toEqual([]);
  });
});
