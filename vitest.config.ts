import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    // The cluster suite needs root and its own setup: vitest.cluster.config.ts, `make test-cluster`.
    exclude: [...configDefaults.exclude, 'test/cluster/**'],
    globalSetup: ['test/harness/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 180_000,
    teardownTimeout: 60_000,
    reporters: ['default', './test/harness/summary-reporter.ts'],
  },
});
