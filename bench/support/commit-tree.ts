/**
 * A commit's files for the comparison scripts (bench/compare.ts, bench/compare-queues.ts): the named paths
 * exported with `git archive` into a temp directory, with this checkout's node_modules linked in and the
 * commit's own package.json (so `#imports` and the module type are the commit's).
 */
import { execFileSync } from 'node:child_process';
import { symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, tempDir } from './parts.ts';

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
