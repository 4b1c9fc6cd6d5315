/**
 * The native data plane's binary for the tests that run it: built with `make build-native` (flock'd, so
 * two test files building at once do not copy over each other), or, when no cargo is found, a reason to
 * skip (`make test` has cargo; hack/ensure-rust.sh says what it looks for).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export const DATA_PLANE_BIN = join(REPO_ROOT, 'build', 'bin', 'apphost-dataplane');

/** Why the data plane cannot be built here (no usable cargo), or undefined when it can. */
export function noCargo(): string | undefined {
  const r = spawnSync(join(REPO_ROOT, 'hack', 'ensure-rust.sh'), { encoding: 'utf8' });
  return r.status === 0
    ? undefined
    : `no cargo >= 1.85 with clippy/rustfmt (hack/ensure-rust.sh: ${r.stderr.trim()})`;
}

/** Builds build/bin/apphost-dataplane from this tree (incremental: ~1 s when nothing changed). */
export function buildDataPlane(): string {
  mkdirSync(join(REPO_ROOT, 'build'), { recursive: true });
  execFileSync('flock', [join(REPO_ROOT, 'build', '.build-native.lock'), 'make', '-s', 'build-native'], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return DATA_PLANE_BIN;
}
