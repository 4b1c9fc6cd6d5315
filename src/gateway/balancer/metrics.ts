/** The balancer's Prometheus metrics: per-app load as the gateway sees it, and what it refused. */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { AppLoad } from '../../shared/contracts/scaling.ts';
import { type Balancer, type BalancerSettings, createBalancer } from './balancer.ts';
import type { PoolEvents } from './pool.ts';

export interface BalancerMetrics {
  /** Hooks for one app's pool (BalancerDeps.events). */
  events(projectId: string, appName: string): PoolEvents;
  /** Reads the balancer's state at scrape time. */
  observe(balancer: Balancer): void;
}

export function createBalancerMetrics(registry: Registry): BalancerMetrics {
  let source: Balancer | undefined;
  const labels = ['project', 'app'] as const;
  const gauge = (name: string, help: string, pick: (s: ReturnType<Balancer['stats']>[number]) => number) =>
    new Gauge({
      name,
      help,
      labelNames: labels,
      registers: [registry],
      collect() {
        this.reset();
        for (const s of source?.stats() ?? []) this.set({ project: s.projectId, app: s.appName }, pick(s));
      },
    });
  gauge(
    'apphost_gateway_app_inflight_calls',
    'Calls this gateway has in flight on the app’s replicas.',
    (s) => s.inflight,
  );
  gauge(
    'apphost_gateway_app_queued_calls',
    'Calls waiting in this gateway for a free replica slot.',
    (s) => s.queued,
  );
  gauge(
    'apphost_gateway_app_ready_replicas',
    'Ready replicas of the app this gateway routes to.',
    (s) => s.ready,
  );
  const rejections = new Counter({
    name: 'apphost_gateway_capacity_rejections_total',
    help: 'Calls answered 503 because no replica slot was found in time (code: queue_full, queue_timeout, cold_start_timeout, app_start_failed).',
    labelNames: ['project', 'app', 'code'],
    registers: [registry],
  });
  const refusals = new Counter({
    name: 'apphost_gateway_replica_refusals_total',
    help: 'Calls a replica refused without running them, retried elsewhere (reason: at_capacity, shutting_down, unreachable).',
    labelNames: ['project', 'app', 'reason'],
    registers: [registry],
  });
  const coldStart = new Histogram({
    name: 'apphost_gateway_cold_start_seconds',
    help: 'How long a call held while the app had no ready replica waited for one (scale from zero, first start).',
    labelNames: labels,
    buckets: [0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120],
    registers: [registry],
  });
  return {
    events: (project, app) => ({
      rejected: (code) => rejections.inc({ project, app, code }),
      refused: (reason) => refusals.inc({ project, app, reason }),
      coldStart: (seconds) => coldStart.observe({ project, app }, seconds),
    }),
    observe(balancer) {
      source = balancer;
    },
  };
}

/** A balancer whose metrics are registered on `registry`. */
export function createObservedBalancer(
  settings: BalancerSettings,
  registry: Registry,
  onWake?: (projectId: string, appName: string, load: AppLoad) => void,
): Balancer {
  const metrics = createBalancerMetrics(registry);
  const balancer = createBalancer(settings, { events: metrics.events, ...(onWake ? { onWake } : {}) });
  metrics.observe(balancer);
  return balancer;
}
