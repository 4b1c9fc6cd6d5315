/**
 * Tells the autoscaler what this process carries: every `intervalMs` a load report with each busy
 * app's in-flight and queued calls (and async runs the worker holds), and at once a wake request
 * when a call is held for an app without a ready replica. Core NATS, fire and forget: a lost report
 * is replaced by the next one, and a process that stops reporting stops counting (reportTtlMs).
 */
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  type AppLoad,
  type LoadReport,
  loadSubject,
  type WakeRequest,
  wakeSubject,
} from '../../shared/contracts/scaling.ts';
import type { Logger } from '../../shared/log.ts';
import type { Balancer } from './balancer.ts';

export interface LoadReporter {
  readonly reporter: string;
  /** Publishes a wake request for one app (the balancer's onWake). */
  wake(projectId: string, appName: string, load: AppLoad): void;
  /** Starts the periodic reports. */
  start(balancer: Balancer, runsHeld?: (projectId: string, appName: string) => number): void;
  /**
   * Publishes a report measured elsewhere in this process, the native data plane's (design §4), as a
   * second reporter `<reporter>-dp` with this reporter's interval: the autoscaler sums the two, as it
   * sums any two reporters. Nothing after `stop`.
   */
  publish(apps: AppLoad[]): void;
  stop(): void;
}

/** The suffix of the reporter that publishes the native data plane's loads (`publish`). */
export const DATA_PLANE_REPORTER_SUFFIX = '-dp';

export function createLoadReporter(deps: {
  nc: NatsConnection;
  log: Logger;
  intervalMs: number;
  /** Defaults to a new random id (a restarted process is a new reporter). */
  reporter?: string;
}): LoadReporter {
  const reporter = deps.reporter ?? randomUUID();
  const encode = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const publish = (subject: string, body: unknown) => {
    try {
      deps.nc.publish(subject, encode(body));
    } catch (err) {
      deps.log.debug({ err, subject }, 'could not publish to the autoscaler');
    }
  };
  return {
    reporter,
    wake(projectId, appName, load) {
      const body: WakeRequest = { v: 1, reporter, load };
      publish(wakeSubject(projectId, appName), body);
    },
    start(balancer, runsHeld) {
      clearInterval(timer);
      timer = setInterval(() => {
        const report: LoadReport = {
          v: 1,
          reporter,
          intervalMs: deps.intervalMs,
          apps: balancer.loads(runsHeld),
        };
        publish(loadSubject(reporter), report);
      }, deps.intervalMs);
      timer.unref();
    },
    publish(apps) {
      if (stopped) return;
      const dp = `${reporter}${DATA_PLANE_REPORTER_SUFFIX}`;
      const report: LoadReport = { v: 1, reporter: dp, intervalMs: deps.intervalMs, apps };
      publish(loadSubject(dp), report);
    },
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}
