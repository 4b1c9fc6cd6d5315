/**
 * The gateway's Prometheus metrics, registered on the Registry passed in. What changes on every call
 * but is only read at a scrape (the in-flight count, sync records skipped, requests by status) is kept
 * in plain numbers and handed to prom-client when it collects: each `inc`/`set` of prom-client builds
 * and hashes its label set. The duration histogram's series are handles kept per app and mode
 * (SeriesHistogram: no label set per observation either).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { SyncCallSkip } from '../runs/sync-calls.ts';
import { type HistogramSeries, SeriesHistogram } from '../shared/series-histogram.ts';

export type RunMode = 'sync' | 'async' | 'stream';

export interface GatewayMetrics {
  /**
   * A finished call: counted in `apphost_gateway_requests_total` (at the next scrape) and observed in
   * `apphost_gateway_request_duration_seconds`. project/app are '' for calls that resolved no app.
   */
  call(project: string, app: string, mode: RunMode, status: number, seconds: number): void;
  webhookJobs: Counter<'outcome'>;
  webhookOutbox: Gauge;
  /** Counts a sync call not recorded (added to `apphost_gateway_sync_records_skipped_total` at a scrape). */
  syncRecordSkipped(reason: SyncCallSkip): void;
}

export interface GatewayMetricSources {
  /** Requests being served now. */
  inflight: () => number;
  /** Messages in the RUNS stream (undefined: unknown now). */
  queueDepth?: () => Promise<number | undefined>;
}

/** One app and mode's calls: its label set, built once, and its calls by status since the last scrape. */
interface CallSeries {
  readonly labels: { project: string; app: string; mode: RunMode };
  readonly byStatus: Map<number, number>;
  readonly duration: HistogramSeries;
}

export function createGatewayMetrics(registry: Registry, sources: GatewayMetricSources): GatewayMetrics {
  const skipped = new Map<SyncCallSkip, number>();
  // project → app → mode; bounded like prom-client's own series (only resolved apps get labels).
  const series = new Map<string, Map<string, Map<RunMode, CallSeries>>>();
  const seriesOf = (project: string, app: string, mode: RunMode): CallSeries => {
    let apps = series.get(project);
    if (!apps) {
      apps = new Map();
      series.set(project, apps);
    }
    let modes = apps.get(app);
    if (!modes) {
      modes = new Map();
      apps.set(app, modes);
    }
    let s = modes.get(mode);
    if (!s) {
      const labels = { project, app, mode };
      s = { labels, byStatus: new Map(), duration: duration.series(labels) };
      modes.set(mode, s);
    }
    return s;
  };
  new Counter({
    name: 'apphost_gateway_requests_total',
    help: 'Run requests by project, app, mode (sync|async|stream) and response status.',
    labelNames: ['project', 'app', 'mode', 'status'],
    registers: [registry],
    collect() {
      for (const apps of series.values())
        for (const modes of apps.values())
          for (const s of modes.values())
            for (const [status, n] of s.byStatus) {
              if (n === 0) continue;
              this.inc({ ...s.labels, status: String(status) }, n);
              s.byStatus.set(status, 0);
            }
    },
  });
  const duration = new SeriesHistogram({
    name: 'apphost_gateway_request_duration_seconds',
    help: 'Time from request to the end of the response (for streams: to the end of the stream).',
    labelNames: ['project', 'app', 'mode'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registers: [registry],
  });
  const m: GatewayMetrics = {
    call(project, app, mode, status, seconds) {
      const s = seriesOf(project, app, mode);
      s.byStatus.set(status, (s.byStatus.get(status) ?? 0) + 1);
      s.duration.observe(seconds);
    },
    webhookJobs: new Counter({
      name: 'apphost_gateway_webhook_jobs_total',
      help: 'Webhook jobs of sync calls by outcome: queued, held (JetStream did not take it; retried), queued_after_retry, dropped (outbox full), too_large (over the NATS max_payload; not forwarded).',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    webhookOutbox: new Gauge({
      name: 'apphost_gateway_webhook_outbox_jobs',
      help: 'Webhook jobs of sync calls held in memory until JetStream takes them.',
      registers: [registry],
    }),
    syncRecordSkipped: (reason) => skipped.set(reason, (skipped.get(reason) ?? 0) + 1),
  };
  new Counter({
    name: 'apphost_gateway_sync_records_skipped_total',
    help: 'Sync calls not recorded for the dashboard and runs API: rate (over APPHOST_GATEWAY_SYNC_RECORDS_PER_*), disconnected (NATS reconnecting), publish_failed (connection closed).',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      for (const [reason, n] of skipped) if (n > 0) this.inc({ reason }, n);
      skipped.clear();
    },
  });
  new Gauge({
    name: 'apphost_gateway_inflight_requests',
    help: 'Run requests being served right now (sync calls, streams and async accepts).',
    registers: [registry],
    collect() {
      this.set(sources.inflight());
    },
  });
  const { queueDepth } = sources;
  if (queueDepth) {
    new Gauge({
      name: 'apphost_runs_queue_depth',
      help: 'Accepted async runs not yet finished (messages in the RUNS stream).',
      registers: [registry],
      async collect() {
        const depth = await queueDepth().catch(() => undefined);
        if (depth !== undefined) this.set(depth);
      },
    });
  }
  return m;
}
