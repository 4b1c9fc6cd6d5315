/** The gateway's Prometheus metrics, registered on the Registry passed in. */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export type RunMode = 'sync' | 'async' | 'stream';

export interface GatewayMetrics {
  requests: Counter<'project' | 'app' | 'mode' | 'status'>;
  duration: Histogram<'project' | 'app' | 'mode'>;
  inflight: Gauge;
  webhookJobs: Counter<'outcome'>;
  webhookOutbox: Gauge;
  syncRecordsSkipped: Counter<'reason'>;
}

export function createGatewayMetrics(
  registry: Registry,
  queueDepth?: () => Promise<number | undefined>,
): GatewayMetrics {
  const m: GatewayMetrics = {
    requests: new Counter({
      name: 'apphost_gateway_requests_total',
      help: 'Run requests by project, app, mode (sync|async|stream) and response status.',
      labelNames: ['project', 'app', 'mode', 'status'],
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'apphost_gateway_request_duration_seconds',
      help: 'Time from request to the end of the response (for streams: to the end of the stream).',
      labelNames: ['project', 'app', 'mode'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers: [registry],
    }),
    inflight: new Gauge({
      name: 'apphost_gateway_inflight_requests',
      help: 'Run requests being served right now (sync calls, streams and async accepts).',
      registers: [registry],
    }),
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
    syncRecordsSkipped: new Counter({
      name: 'apphost_gateway_sync_records_skipped_total',
      help: 'Sync calls not recorded for the dashboard and runs API: rate (over APPHOST_GATEWAY_SYNC_RECORDS_PER_*), disconnected (NATS reconnecting), publish_failed (connection closed).',
      labelNames: ['reason'],
      registers: [registry],
    }),
  };
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
