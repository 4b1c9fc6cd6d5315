/** The operator's Prometheus metrics, registered on the Registry passed in. */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export interface OperatorMetrics {
  reconciles: Counter<'controller' | 'result'>;
  reconcileDuration: Histogram<'controller'>;
  queueDepth: Gauge<'controller'>;
  writes: Counter<'verb' | 'resource'>;
  leader: Gauge;
}

export function createOperatorMetrics(registry: Registry): OperatorMetrics {
  return {
    reconciles: new Counter({
      name: 'apphost_operator_reconciles_total',
      help: 'Reconciles by controller and result (success, error, requeue).',
      labelNames: ['controller', 'result'],
      registers: [registry],
    }),
    reconcileDuration: new Histogram({
      name: 'apphost_operator_reconcile_duration_seconds',
      help: 'Time one reconcile took.',
      labelNames: ['controller'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'apphost_operator_queue_depth',
      help: 'Keys waiting in the work queue.',
      labelNames: ['controller'],
      registers: [registry],
    }),
    writes: new Counter({
      name: 'apphost_operator_kube_writes_total',
      help: 'Write requests sent to the API server, by verb and resource.',
      labelNames: ['verb', 'resource'],
      registers: [registry],
    }),
    leader: new Gauge({
      name: 'apphost_operator_leader',
      help: '1 while this instance holds the leader Lease.',
      registers: [registry],
    }),
  };
}
