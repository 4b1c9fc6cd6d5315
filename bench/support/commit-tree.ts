/**
 * A commit's files for the comparison scripts (bench/compare.ts, compare-queues.ts, gateway-idle.ts,
 * pod-idle.ts, ops-alloc.ts): the named paths exported with `git archive` into a temp directory, with this
 * checkout's node_modules linked in and the commit's own package.json (so `#imports` and the module type
 * are the commit's).
 */
import { execFileSync } from 'node:child_process';
import { symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { compileGatewayEntry, REPO_ROOT, tempDir } from './parts.ts';

/** Bound on the archive's size in memory. */
const ARCHIVE_MAX_BYTES = 256 * 1024 * 1024;

export function exportCommitTree(commit: string, paths: readonly string[], prefix: string): string {
  const dir = tempDir(prefix);
  const tar = execFileSync('git', ['-C', REPO_ROOT, 'archive', commit, ...paths], {
    maxBuffer: ARCHIVE_MAX_BYTES,
  });
  execFileSync('tar', ['-x', '-C', dir], { input: tar });
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(dir, 'node_modules'));
  writeFileSync(
    join(dir, 'package.json'),
    execFileSync('git', ['-C', REPO_ROOT, 'show', `${commit}:package.json`]),
  );
  return dir;
}

/**
 * What a commit's benchmark gateway is built from: its src/, bench/ (its entry), test/harness (which bench
 * imports), charts (the chart's node flags), hack/ (its bundler) and tsconfigs.
 */
const GATEWAY_TREE_PATHS = [
  'src',
  'bench',
  'test/harness',
  'charts',
  'hack',
  'tsconfig.json',
  'tsconfig.build.json',
];

/**
 * Each commit's benchmark gateway, compiled and bundled as `make bench` does (compileGatewayEntry of its
 * own tree): commit → its entry. bench/compare.ts, pod-idle.ts and ops-alloc.ts.
 */
export async function compileCommitGateways(
  commits: Iterable<string>,
  prefix: string,
): Promise<Map<string, string>> {
  const entries = new Map<string, string>();
  for (const commit of commits)
    if (!entries.has(commit))
      entries.set(commit, await compileGatewayEntry(exportCommitTree(commit, GATEWAY_TREE_PATHS, prefix)));
  return entries;
}
