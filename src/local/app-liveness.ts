/**
 * Local mode's live figures for the dashboard: calls in flight and waiting per app, from the in-process
 * gateway's balancer (read without touching the average the autoscaler's load reports use).
 */
import type { AppLiveness } from '../dashboard/context.ts';
import type { Balancer } from '../gateway/balancer/balancer.ts';

export function balancerLiveness(balancer: Pick<Balancer, 'find'>): AppLiveness {
  return {
    async get(projectId, appName) {
      const pool = balancer.find(projectId, appName);
      if (!pool) return { inFlight: 0 };
      const s = pool.stats();
      return { inFlight: s.inflight, queued: s.queued };
    },
  };
}
