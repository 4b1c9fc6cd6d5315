/**
 * The build worker: carries queued deploys (the BUILDS work queue) through `Deployments.run`, a few at a
 * time. At-least-once: a job is acked once its record is final; a worker that dies mid-build leaves it
 * unacked and JetStream hands it to the next worker after `ackWaitMs`, which resumes from the record
 * (a finished dependency set is not built again; an applied version is watched, not applied again).
 */
import { AckPolicy, type Consumer, type JsMsg, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type Clock, systemClock } from '../shared/clock.ts';
import { BUILDS_STREAM, type BuildJob, buildSubject } from '../shared/contracts/builds.ts';
import type { Logger } from '../shared/log.ts';
import type { Deployments } from './deployments.ts';

export interface BuildWorkerSettings {
  consumerName: string;
  /** Builds carried at once. */
  concurrency: number;
  /** An unacked job is redelivered after this long without a heartbeat. */
  ackWaitMs: number;
  pullExpiresMs: number;
  pullErrorBackoffMs: number;
}

export const DEFAULT_BUILD_WORKER_SETTINGS: BuildWorkerSettings = {
  consumerName: 'apphost-builds',
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

const nanos = (ms: number) => ms * 1_000_000;

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
  let consumer: Consumer | undefined;
  let stopping = false;
  let loopDone: Promise<void> | undefined;
  const running = new Set<AbortController>();
  const tasks = new Set<Promise<void>>();

  async function loop(): Promise<void> {
    while (!stopping) {
      if (tasks.size >= s.concurrency) {
        await Promise.race(tasks);
        continue;
      }
      let msg: JsMsg | null = null;
      try {
        msg = (await consumer?.next({ expires: s.pullExpiresMs })) ?? null;
      } catch (err) {
        if (!stopping) log.warn({ err }, 'pulling a build failed; retrying');
        if (!stopping) await clock.sleep(s.pullErrorBackoffMs).catch(() => undefined);
        continue;
      }
      if (!msg) continue;
      if (stopping) {
        msg.nak();
        break;
      }
      const m = msg;
      const task = handle(m).finally(() => tasks.delete(task));
      tasks.add(task);
    }
  }

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
      const config = {
        durable_name: s.consumerName,
        ack_policy: AckPolicy.Explicit,
        ack_wait: nanos(s.ackWaitMs),
        max_deliver: -1,
        max_ack_pending: Math.max(s.concurrency * 4, 16),
      };
      try {
        await jsm.consumers.add(BUILDS_STREAM, config);
      } catch {
        const { durable_name: _d, ...rest } = config;
        await jsm.consumers.update(BUILDS_STREAM, s.consumerName, rest);
      }
      consumer = await jetstream(deps.nc).consumers.get(BUILDS_STREAM, s.consumerName);
      loopDone = loop();
      log.info({ consumer: s.consumerName, concurrency: s.concurrency }, 'build worker started');
    },

    async stop(boundMs) {
      stopping = true;
      const all = Promise.all([...tasks]);
      let timer: NodeJS.Timeout | undefined;
      const bounded = new Promise<'bound'>((r) => {
        timer = setTimeout(() => r('bound'), boundMs);
      });
      if ((await Promise.race([all.then(() => 'done' as const), bounded])) === 'bound') {
        log.warn({ active: running.size }, 'stop bound passed: abandoning running builds for redelivery');
        for (const ac of running) ac.abort();
        await Promise.race([all, new Promise((r) => setTimeout(r, 2_000))]);
      }
      clearTimeout(timer);
      await Promise.race([loopDone, new Promise((r) => setTimeout(r, s.pullExpiresMs + 1_000))]);
    },

    active: () => running.size,
  };
}
