/**
 * The build worker: carries queued deploys (the BUILDS work queue) through `Deployments.run`, a few at a
 * time. At-least-once: a job is acked once its record is final; a worker that dies mid-build leaves it
 * unacked and JetStream hands it to the next worker after `ackWaitMs`, which resumes from the record
 * (a finished dependency set is not built again; an applied version is watched, not applied again).
 */
import { AckPolicy, type JsMsg, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type Clock, systemClock } from '../shared/clock.ts';
import { BUILDS_STREAM, type BuildJob, buildSubject } from '../shared/contracts/builds.ts';
import type { Logger } from '../shared/log.ts';
import { ensureConsumer, nanos } from '../shared/nats/jetstream.ts';
import { type PullLoop, startPullLoop } from '../shared/nats/pull-loop.ts';
import type { Deployments } from './deployments.ts';

export interface BuildWorkerSettings {
  consumerName: string;
  /** Which builds this worker takes: every project's (a cluster), or one project's (apphost dev). */
  subjects: string;
  /** Builds carried at once. */
  concurrency: number;
  /** An unacked job is redelivered after this long without a heartbeat. */
  ackWaitMs: number;
  pullExpiresMs: number;
  pullErrorBackoffMs: number;
}

export const DEFAULT_BUILD_WORKER_SETTINGS: BuildWorkerSettings = {
  consumerName: 'apphost-builds',
  subjects: 'apphost.builds.>',
  concurrency: 2,
  ackWaitMs: 60_000,
  pullExpiresMs: 5_000,
  pullErrorBackoffMs: 1_000,
};

export interface BuildWorker {
  start(): Promise<void>;
  /** Stops pulling; builds still running after `boundMs` are abandoned for redelivery. */
  stop(boundMs: number): Promise<void>;
  active(): number;
}

/** Publishes a build job; the build id is the message id, so a retried publish is one build. */
export async function enqueueBuild(nc: NatsConnection, job: BuildJob): Promise<void> {
  await jetstream(nc).publish(buildSubject(job.projectId, job.appName), JSON.stringify(job), {
    msgID: job.buildId,
  });
}

export function createBuildWorker(deps: {
  nc: NatsConnection;
  deployments: Deployments;
  log: Logger;
  clock?: Clock;
  settings?: Partial<BuildWorkerSettings>;
}): BuildWorker {
  const s = { ...DEFAULT_BUILD_WORKER_SETTINGS, ...deps.settings };
  const clock = deps.clock ?? systemClock;
  const { log } = deps;
  let loop: PullLoop | undefined;
  const running = new Set<AbortController>();

  async function handle(msg: JsMsg): Promise<void> {
    let job: BuildJob;
    try {
      job = msg.json<BuildJob>();
      if (job.v !== 1 || !job.buildId || !job.projectId || !job.appName) throw new Error('not a v1 BuildJob');
    } catch (err) {
      log.error({ err, seq: msg.seq }, 'dropping an unreadable build message');
      msg.term('unreadable');
      return;
    }
    const ac = new AbortController();
    running.add(ac);
    try {
      await deps.deployments.run(job, () => msg.working(), ac.signal);
      await msg.ackAck().catch(() => msg.ack());
    } catch (err) {
      if (ac.signal.aborted) {
        log.info({ buildId: job.buildId }, 'build abandoned on shutdown; it will be resumed');
        msg.nak();
      } else {
        log.error({ err, buildId: job.buildId }, 'build failed unexpectedly; it will be retried');
        msg.nak(s.pullErrorBackoffMs);
      }
    } finally {
      running.delete(ac);
    }
  }

  return {
    async start() {
      const jsm = await jetstreamManager(deps.nc);
      await ensureConsumer(jsm, BUILDS_STREAM, {
        durable_name: s.consumerName,
        ack_policy: AckPolicy.Explicit,
        filter_subject: s.subjects,
        ack_wait: nanos(s.ackWaitMs),
        max_deliver: -1,
        max_ack_pending: Math.max(s.concurrency * 4, 16),
      });
      loop = startPullLoop({
        consumer: await jetstream(deps.nc).consumers.get(BUILDS_STREAM, s.consumerName),
        concurrency: s.concurrency,
        expiresMs: s.pullExpiresMs,
        errorBackoffMs: s.pullErrorBackoffMs,
        clock,
        log,
        handle,
        onError: (err, msg) => {
          log.error({ err, seq: msg.seq }, 'build handling failed; it will be redelivered');
          msg.nak(s.pullErrorBackoffMs);
        },
      });
      log.info(
        { consumer: s.consumerName, subjects: s.subjects, concurrency: s.concurrency },
        'build worker started',
      );
    },

    async stop(boundMs) {
      loop?.stop();
      const done = loop?.done ?? Promise.resolve();
      let timer: NodeJS.Timeout | undefined;
      const bounded = new Promise<'bound'>((r) => {
        timer = setTimeout(() => r('bound'), boundMs);
      });
      if ((await Promise.race([done.then(() => 'done' as const), bounded])) === 'bound') {
        log.warn({ active: running.size }, 'stop bound passed: abandoning running builds for redelivery');
        for (const ac of running) ac.abort();
        await Promise.race([done, new Promise((r) => setTimeout(r, 2_000))]);
      }
      clearTimeout(timer);
    },

    active: () => running.size,
  };
}
