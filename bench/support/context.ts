/** What every benchmark module gets from bench/run.ts. */
import type { LoadGenerator } from './load.ts';
import type { Parts } from './parts.ts';
import type { Reporter } from './report.ts';

export interface BenchSettings {
  /** Seconds of measured load per row (BENCH_DURATION_SECONDS, default 10). */
  durationSeconds: number;
  /** Seconds of unmeasured load before each row, to warm JITs and connection pools (BENCH_WARMUP_SECONDS, default 3). */
  warmupSeconds: number;
  /** Concurrent connections of the load generator (BENCH_CONNECTIONS, default 32). */
  connections: number;
  /**
   * Sync rows are measured this many times, the variants interleaved (direct, nginx, gateway, direct, ...),
   * and the best round of each is reported: on a shared machine the least disturbed run (BENCH_ROUNDS, default 2).
   */
  rounds: number;
  /** Sequential requests per streaming variant (BENCH_STREAM_REQUESTS, default 500). */
  streamRequests: number;
  /** Webhook jobs in the backlog drained for deliveries/s (BENCH_WEBHOOK_BACKLOG, default 10 000). */
  webhookBacklog: number;
  /**
   * Webhook jobs queued before that backlog, drained by the same new dispatcher process but not measured:
   * its JIT and heap warm-up (BENCH_WEBHOOK_WARMUP, default 20 000).
   */
  webhookWarmup: number;
  /** Webhook jobs published at a steady pace for the delay figures (BENCH_WEBHOOK_PACED, default 200). */
  webhookPaced: number;
  /** Pace of those jobs per second (BENCH_WEBHOOK_RATE, default 100). */
  webhookRate: number;
  /** App counts for the operator benchmark (BENCH_OPERATOR_APPS, default "100,1000"). */
  operatorApps: number[];
  /**
   * Seconds the idle gateways receive a pod's idle traffic (probes, scrapes: support/idle-traffic.ts) after
   * the memory row's reading at `listening`, before its second, settled reading; 0 skips it
   * (BENCH_IDLE_SETTLE_SECONDS, default 60).
   */
  idleSettleSeconds: number;
}

export interface BenchContext {
  parts: Parts;
  load: LoadGenerator | undefined;
  /** Why there is no load generator, when `load` is undefined. */
  loadMissing?: string;
  report: Reporter;
  settings: BenchSettings;
  /** nginx binary, when installed. */
  nginx: string | undefined;
}

/** One benchmark: reports its rows through `ctx.report` as each finishes. */
export type Benchmark = (ctx: BenchContext) => Promise<void>;

/** Adds a warning to a row's last column when a run saw errors or unexpected statuses. */
export function errorNote(r: { non2xx: number; errors: number; requests: number }): string {
  const parts: string[] = [];
  if (r.non2xx) parts.push(`${r.non2xx} unexpected statuses`);
  if (r.errors) parts.push(`${r.errors} socket errors/timeouts`);
  return parts.length ? ` (${parts.join(', ')} of ${r.requests})` : '';
}
