/** manifests/ and the chart's crds/ are generated; these fail when someone forgot `make manifests`. */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { binaryPath } from '../../harness/binaries.ts';
import { CHART, helmEnv, REPO, run } from './helpers.ts';

describe('generated install files', () => {
  const out = mkdtempSync(join(tmpdir(), 'apphost-manifests-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it("the chart's crds/ are exactly crds/", () => {
    const source = readdirSync(join(REPO, 'crds'))
      .filter((f) => f.endsWith('.yaml'))
      .sort();
    expect(readdirSync(join(CHART, 'crds')).sort()).toEqual(source);
    for (const f of source)
      expect(
        readFileSync(join(CHART, 'crds', f), 'utf8'),
        `charts/apphost/crds/${f} is stale: run make manifests`,
      ).toBe(readFileSync(join(REPO, 'crds', f), 'utf8'));
  });

  it('manifests/ is what hack/render-manifests.sh renders from the chart now', async () => {
    const r = await run(join(REPO, 'hack', 'render-manifests.sh'), [out], {
      env: { ...helmEnv, HELM: binaryPath('helm') },
    });
    expect(r.code, r.stderr).toBe(0);
    const committed = readdirSync(join(REPO, 'manifests'))
      .filter((f) => f.endsWith('.yaml'))
      .sort();
    expect(committed).toEqual(readdirSync(out).sort());
    for (const f of committed)
      expect(
        readFileSync(join(REPO, 'manifests', f), 'utf8'),
        `manifests/${f} is stale: run make manifests`,
      ).toBe(readFileSync(join(out, f), 'utf8'));
  });
});
