import { defineConfig } from 'vitest/config';

/**
 * The cluster suite (test/cluster): one real single-node cluster per run, apphost installed on it with
 * Helm. `make test-cluster` runs it (root only); docs/testing.md says how to add a test.
 */
export default defineConfig({
  test: {
    include: ['test/cluster/**/*.test.ts'],
    globalSetup: ['test/cluster/global-setup.ts'],
    pool: 'forks',
    // Files share one platform install; they run one at a time so their loads and faults do not mix.
    fileParallelism: false,
    testTimeout: 180_000,
    hookTimeout: 600_000,
    teardownTimeout: 120_000,
    reporters: ['default', './test/harness/summary-reporter.ts'],
  },
});
