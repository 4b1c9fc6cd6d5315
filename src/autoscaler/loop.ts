/**
 * The autoscaler as a running loop, the same for the operator and for local mode: it listens to load
 * reports and wake requests on NATS, counts each app's async runs waiting in JetStream, decides every
 * tick (and at once for a wake), and calls `scale` only when an app's replica count must change — so a
 * steady state makes no writes. While `active()` is false (not the leader) it keeps listening, so a
 * new leader starts with warm windows, but decides nothing.
 */
import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { EffectiveScaling } from '../apis/v1alpha1/scaling.ts';
import { RUNS_STREAM } from '../shared/contracts/messaging.ts';
import {
  LOAD_SUBJECTS,
  LoadReportSchema,
  WAKE_SUBJECTS,
  WakeRequestSchema,
} from '../shared/contracts/scaling.ts';
import type { Logger } from '../shared/log.ts';
import { type AppDecision, Autoscaler, type AutoscalerSettings, describeDecision } from './autoscaler.ts';

export interface AutoscaledApp {
  /** `<project>/<app>`, as load reports and RUNS subjects name it. */
  key: string;
  scaling: EffectiveScaling;
  readyReplicas: number;
  /** Replicas asked for now (the last decision, or where the app started). */
  desiredReplicas: number;
  /** False until a first decision is recorded: `scale` is then called even without a change. */
  decided?: boolean;
}

export interface AutoscalerLoopSettings extends AutoscalerSettings {
  /** Bound on counting the runs waiting in JetStream (the previous count is used when it passes). */
  runsCountTimeoutMs: number;
}

export interface AutoscalerLoopDeps {
  nc: NatsConnection;
  log: Logger;
  settings: AutoscalerLoopSettings;
  now?: () => number;
  /** Every app to scale, as it is now. */
  apps(): Iterable<AutoscaledApp>;
  app(key: string): AutoscaledApp | undefined;
  /** Makes `decision.replicas` so; called only when it differs from `app.desiredReplicas`. */
  scale(app: AutoscaledApp, decision: AppDecision): Promise<void>;
  /** Whether to decide (the leader); reports are collected either way. */
  active(): boolean;
  /** Every decision, changed or not (metrics). */
  observe?(app: AutoscaledApp, decision: AppDecision): void;
}

export interface AutoscalerLoop {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Runs one tick now (tests, and the first decision after becoming leader). */
  tick(): Promise<void>;
}

/** Messages waiting in RUNS per `<project>/<app>` (subject `apphost.runs.<project>.<app>`). */
export async function runsPerApp(jsm: JetStreamManager): Promise<Map<string, number>> {
  const info = await jsm.streams.info(RUNS_STREAM, { subjects_filter: 'apphost.runs.>' });
  const out = new Map<string, number>();
  for (const [subject, n] of Object.entries(info.state.subjects ?? {})) {
    const [, , project, app] = subject.split('.');
    if (project && app) out.set(`${project}/${app}`, n);
  }
  return out;
}

export function createAutoscalerLoop(deps: AutoscalerLoopDeps): AutoscalerLoop {
  const { nc, log, settings } = deps;
  const now = deps.now ?? Date.now;
  const autoscaler = new Autoscaler(settings);
  const subs: Subscription[] = [];
  let timer: NodeJS.Timeout | undefined;
  let jsm: JetStreamManager | undefined;
  let runs = new Map<string, number>();
  let stopped = false;
  /** One decision at a time per app (a wake can arrive during a tick). */
  const busy = new Map<string, Promise<void>>();

  const countRuns = async () => {
    try {
      jsm ??= await jetstreamManager(nc, { timeout: settings.runsCountTimeoutMs });
      runs = await runsPerApp(jsm);
    } catch (err) {
      const e = err as { name?: string; message?: string };
      // No RUNS stream yet means no runs.
      if (/stream not found/i.test(String(e?.message))) runs = new Map();
      else log.debug({ err }, 'could not count queued runs; using the previous count');
    }
  };

  const decideOne = (app: AutoscaledApp): Promise<void> => {
    const run = async () => {
      const d = autoscaler.decide(
        {
          key: app.key,
          scaling: app.scaling,
          readyReplicas: app.readyReplicas,
          currentReplicas: app.desiredReplicas,
          runsInStream: runs.get(app.key) ?? 0,
        },
        now(),
      );
      deps.observe?.(app, d);
      if (d.replicas === app.desiredReplicas && app.decided !== false) return;
      log.info(
        {
          app: app.key,
          from: app.desiredReplicas,
          to: d.replicas,
          reason: d.reason,
          panicking: d.panicking,
          observed: d.observed,
          stable: d.stable,
          panic: d.panic,
        },
        `autoscaler: ${describeDecision(d, app.desiredReplicas)}`,
      );
      try {
        await deps.scale(app, d);
      } catch (err) {
        log.warn({ err, app: app.key }, 'could not apply the scaling decision; retrying next tick');
      }
    };
    const prev = busy.get(app.key) ?? Promise.resolve();
    const next = prev.then(run, run).finally(() => {
      if (busy.get(app.key) === next) busy.delete(app.key);
    });
    busy.set(app.key, next);
    return next;
  };

  const tick = async () => {
    autoscaler.forget((key) => deps.app(key) !== undefined, now());
    if (!deps.active()) return;
    await countRuns();
    // An app whose last decision is still being applied (a slow API call) is skipped this tick, so one
    // slow app never holds up the others, nor piles decisions up behind itself.
    const decisions = [...deps.apps()].filter((a) => !busy.has(a.key)).map((a) => decideOne(a));
    await Promise.race([Promise.all(decisions), new Promise((r) => setTimeout(r, settings.tickMs).unref())]);
  };

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      tick()
        .catch((err: unknown) => log.error({ err }, 'autoscaler tick failed'))
        .finally(schedule);
    }, settings.tickMs);
  };

  return {
    async start() {
      subs.push(
        nc.subscribe(LOAD_SUBJECTS, {
          callback: (err, msg) => {
            if (err) return;
            const parsed = LoadReportSchema.safeParse(safeJson(msg.data));
            if (parsed.success) autoscaler.reports.record(parsed.data, now());
            else log.debug({ subject: msg.subject }, 'ignoring a malformed load report');
          },
        }),
        nc.subscribe(WAKE_SUBJECTS, {
          callback: (err, msg) => {
            if (err) return;
            const parsed = WakeRequestSchema.safeParse(safeJson(msg.data));
            if (!parsed.success) return;
            const { reporter, load } = parsed.data;
            autoscaler.reports.recordApp(reporter, load, now());
            const app = deps.app(`${load.projectId}/${load.appName}`);
            if (app && deps.active()) {
              decideOne(app).catch((e: unknown) => log.error({ err: e }, 'wake decision failed'));
            }
          },
        }),
      );
      await nc.flush();
      schedule();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      for (const s of subs) s.unsubscribe();
      await Promise.allSettled([...busy.values()]);
    },
    tick,
  };
}

function safeJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(data));
  } catch {
    return undefined;
  }
}
