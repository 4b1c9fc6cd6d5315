/** The run worker's Prometheus metrics, registered on the Registry passed in. */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export interface RunWorkerMetrics {
  finished: Counter<'state'>;
  executions: Counter;
  duration: Histogram<'state'>;
  active: Gauge;
}

export function createRunWorkerMetrics(registry: Registry): RunWorkerMetrics {
  return {
    finished: new Counter({
      name: 'apphost_runs_finished_total',
      help: 'Async runs finished, by final state.',
      labelNames: ['state'],
      registers: [registry],
    }),
    executions: new Counter({
      name: 'apphost_run_executions_total',
      help: 'Run executions started (more than runs when runs are redelivered).',
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'apphost_run_duration_seconds',
      help: 'Time one execution of an async run took.',
      labelNames: ['state'],
      buckets: [0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 43200],
      registers: [registry],
    }),
    active: new Gauge({
      name: 'apphost_runs_active',
      help: 'Async runs this worker is executing now.',
      registers: [registry],
    }),
  };
}
