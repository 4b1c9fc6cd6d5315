import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/** Bound on one child Node's run (start, a few MB allocated, one collection): ~0.2 s idle. */
const CHILD_TIMEOUT_MS = 20_000;

/**
 * A Node process with `flags` that grows its young generation as a start-up does, then calls
 * releaseStartupHeap with its `gc` global: what it returned and the young generation's size before and
 * after, in bytes.
 */
async function inChild(flags: string[]): Promise<{ released: boolean; before: number; after: number }> {
  const script = `
    import v8 from 'node:v8';
    const { releaseStartupHeap } = await import(${JSON.stringify(join(import.meta.dirname, 'startup-heap.ts'))});
    const young = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
    let kept = [];
    for (let i = 0; i < 200_000; i++) {
      kept.push({ i, s: 'x' + i });
      if (kept.length > 50_000) kept = [];
    }
    kept = null;
    const before = young();
    const released = releaseStartupHeap(globalThis.gc);
    console.log(JSON.stringify({ released, before, after: young() }));
  `;
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [...flags, '--input-type=module', '--eval', script],
    { timeout: CHILD_TIMEOUT_MS, env: { ...process.env, NODE_OPTIONS: '' } },
  );
  return JSON.parse(stdout);
}

describe("the start-up heap given back (the chart's --expose-gc)", () => {
  it('shrinks the young generation start-up grew to its bound back to its minimum', async () => {
    const r = await inChild(['--max-semi-space-size=8', '--expose-gc']);
    expect(r.released).toBe(true);
    // Grown to its bound (2 × 8 MiB), as a gateway's start-up grows it; given back (V8's minimum: 1 MiB).
    expect(r.before).toBe(16 * 1024 * 1024);
    expect(r.after).toBeLessThanOrEqual(1024 * 1024);
  });

  it("does nothing, and throws nothing, without --expose-gc (a user's own gateway.nodeOptions)", async () => {
    const r = await inChild(['--max-semi-space-size=8']);
    expect(r.released).toBe(false);
    expect(r.after).toBe(r.before);
  });
});
