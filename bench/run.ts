/**
 * `make bench` / `node bench/run.ts [sync|async|streaming|webhooks|operator ...]`: runs the benchmark
 * suite (all of it, or the named subset) on this machine, prints each row as it finishes, and writes
 * the table to bench/RESULTS.md. Settings: docs/benchmarks.md.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { asyncAccept } from './async-accept.ts';
import { operatorConvergence } from './operator.ts';
import { scaling } from './scaling.ts';
import { streaming } from './streaming.ts';
import type { BenchContext, Benchmark } from './support/context.ts';
import { type LoadGenerator, pickLoadGenerator } from './support/load.ts';
import { findNginx } from './support/nginx.ts';
import { BENCH_DIR, createParts, PYTHON, REPO_ROOT } from './support/parts.ts';
import { createReporter, loadAverageNow, machineInfo, renderResults } from './support/report.ts';
import { syncOverhead } from './sync-overhead.ts';
import { webhooks } from './webhooks.ts';

const BENCHMARKS: Record<string, Benchmark> = {
  sync: syncOverhead,
  async: asyncAccept,
  streaming,
  webhooks,
  operator: operatorConvergence,
  scaling,
};

const int = (def: number, min: number) => z.coerce.number().int().min(min).default(def);
const Env = z.object({
  BENCH_DURATION_SECONDS: int(10, 1),
  BENCH_WARMUP_SECONDS: int(3, 0),
  BENCH_CONNECTIONS: int(32, 1),
  BENCH_ROUNDS: int(2, 1),
  BENCH_IDLE_SETTLE_SECONDS: int(60, 0),
  BENCH_STREAM_REQUESTS: int(500, 5),
  BENCH_WEBHOOK_BACKLOG: int(10_000, 10),
  BENCH_WEBHOOK_WARMUP: int(20_000, 0),
  BENCH_WEBHOOK_PACED: int(200, 10),
  BENCH_WEBHOOK_RATE: int(100, 1),
  BENCH_OPERATOR_APPS: z
    .string()
    .default('100,1000')
    .transform((s) => s.split(',').map((n) => Number.parseInt(n.trim(), 10)))
    .refine(
      (l) => l.every((n) => Number.isInteger(n) && n > 0),
      'a comma-separated list of positive integers',
    ),
  BENCH_LOAD_TOOL: z.enum(['wrk', 'autocannon']).optional(),
  /** nginx binary for the baseline rows; `none` skips them; unset: Debian's, when installed. */
  BENCH_NGINX: z.string().optional(),
  BENCH_GATEWAY_LOG_LEVEL: z
    .enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'])
    .default('warn'),
  /** Extra node flags for the gateway child, space-separated (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`). */
  BENCH_GATEWAY_NODE_ARGS: z
    .string()
    .default('')
    .transform((s) => s.split(' ').filter((a) => a !== '')),
  /** Where the Markdown table goes; empty = do not write it. A subset run never replaces RESULTS.md. */
  BENCH_RESULTS_FILE: z.string().optional(),
});

async function main(): Promise<number> {
  const env = Env.parse(process.env);
  // The memory figure is read during the sync benchmark.
  const names = process.argv.slice(2).map((n) => (n === 'memory' ? 'sync' : n));
  const unknown = names.filter((n) => !(n in BENCHMARKS));
  if (unknown.length) {
    process.stderr.write(
      `unknown benchmark(s): ${unknown.join(', ')}; choose from ${Object.keys(BENCHMARKS).join(', ')}\n`,
    );
    return 2;
  }
  const selected = names.length
    ? Object.keys(BENCHMARKS).filter((n) => names.includes(n))
    : Object.keys(BENCHMARKS);

  let load: LoadGenerator | undefined;
  let loadMissing: string | undefined;
  try {
    load = pickLoadGenerator(REPO_ROOT, env.BENCH_LOAD_TOOL);
  } catch (err) {
    loadMissing = (err as Error).message;
  }
  const nginx = env.BENCH_NGINX === 'none' ? undefined : (env.BENCH_NGINX ?? findNginx());
  const report = createReporter();
  const parts = createParts({
    gatewayLogLevel: env.BENCH_GATEWAY_LOG_LEVEL,
    gatewayNodeArgs: env.BENCH_GATEWAY_NODE_ARGS,
  });
  const ctx: BenchContext = {
    parts,
    load,
    ...(loadMissing ? { loadMissing } : {}),
    report,
    nginx,
    settings: {
      durationSeconds: env.BENCH_DURATION_SECONDS,
      warmupSeconds: env.BENCH_WARMUP_SECONDS,
      connections: env.BENCH_CONNECTIONS,
      rounds: env.BENCH_ROUNDS,
      streamRequests: env.BENCH_STREAM_REQUESTS,
      webhookBacklog: env.BENCH_WEBHOOK_BACKLOG,
      webhookWarmup: env.BENCH_WEBHOOK_WARMUP,
      webhookPaced: env.BENCH_WEBHOOK_PACED,
      webhookRate: env.BENCH_WEBHOOK_RATE,
      operatorApps: env.BENCH_OPERATOR_APPS,
      idleSettleSeconds: env.BENCH_IDLE_SETTLE_SECONDS,
    },
  };

  const started = Date.now();
  const loadAverageAtStart = loadAverageNow();
  process.stdout.write(`apphost benchmarks: ${selected.join(', ')} (logs in ${parts.logDir})\n`);
  process.stdout.write(
    `load generator: ${load?.name ?? `none: ${loadMissing}`}; nginx: ${nginx ?? 'not installed'}\n`,
  );
  let failed = 0;
  try {
    for (const name of selected) {
      const t0 = Date.now();
      process.stdout.write(`\n[${name}]\n`);
      try {
        await (BENCHMARKS[name] as Benchmark)(ctx);
      } catch (err) {
        failed++;
        report.unavailable(name, 'run', `failed: ${(err as Error).message.split('\n')[0]}`);
        process.stderr.write(`${name} failed: ${(err as Error).stack ?? String(err)}\n`);
      }
      process.stdout.write(`  (${name} took ${((Date.now() - t0) / 1000).toFixed(1)} s)\n`);
    }
  } finally {
    await parts.stop();
  }
  const total = (Date.now() - started) / 1000;
  report.note(`The whole run took ${total.toFixed(0)} s.`);
  report.note(
    "Everything ran on this one machine at once (load generator, gateway, runtime, NATS, control plane), and other engineers' test runs may have loaded it too: read the figures as ratios on the same machine, not as absolute capacity.",
  );
  const resultsFile =
    env.BENCH_RESULTS_FILE ??
    (names.length ? join(BENCH_DIR, '.out', 'RESULTS-partial.md') : join(BENCH_DIR, 'RESULTS.md'));
  if (resultsFile) {
    mkdirSync(dirname(resultsFile), { recursive: true });
    const info = machineInfo({ python: PYTHON, loadTool: load?.name ?? 'none', nginx, loadAverageAtStart });
    writeFileSync(resultsFile, renderResults(info, report.rows(), report.notes()));
    process.stdout.write(`\nwrote ${resultsFile}\n`);
  }
  return failed ? 1 : 0;
}

process.exitCode = await main();
