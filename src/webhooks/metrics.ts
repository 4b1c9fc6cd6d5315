import { Counter, Histogram, type Registry } from 'prom-client';
import type { WebhookAttemptOutcome } from '../shared/contracts/messaging.ts';

export interface WebhookMetrics {
  attempt(outcome: WebhookAttemptOutcome, seconds: number): void;
  /** A delivery reached its end; `seconds` runs from the function's completion to that end. */
  delivery(result: 'delivered' | 'failed', seconds: number): void;
}

export function createWebhookMetrics(registry: Registry): WebhookMetrics {
  const attempts = new Counter({
    name: 'apphost_webhook_attempts_total',
    help: 'Webhook delivery attempts, by outcome.',
    labelNames: ['outcome'],
    registers: [registry],
  });
  const attemptDuration = new Histogram({
    name: 'apphost_webhook_attempt_duration_seconds',
    help: 'Duration of one webhook delivery attempt.',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const deliveries = new Counter({
    name: 'apphost_webhook_deliveries_total',
    help: 'Webhook deliveries that reached an end, by result (delivered, failed).',
    labelNames: ['result'],
    registers: [registry],
  });
  const deliveryDuration = new Histogram({
    name: 'apphost_webhook_delivery_duration_seconds',
    help: 'Time from the function completing to its webhook delivery succeeding or finally failing.',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 300],
    registers: [registry],
  });
  // Label children looked up once per value, not hashed from a label object per job.
  const children = (counter: Counter<string>) => {
    const byValue = new Map<string, Counter.Internal>();
    return (value: string) => {
      let child = byValue.get(value);
      if (!child) {
        child = counter.labels(value);
        byValue.set(value, child);
      }
      return child;
    };
  };
  const byOutcome = children(attempts);
  const byResult = children(deliveries);
  return {
    attempt(outcome, seconds) {
      byOutcome(outcome).inc();
      attemptDuration.observe(seconds);
    },
    delivery(result, seconds) {
      byResult(result).inc();
      deliveryDuration.observe(Math.max(0, seconds));
    },
  };
}
