/**
 * The gateway as N processes in one pod (APPHOST_GATEWAY_PROCESSES, docs/gateway.md#several-processes):
 * a primary that supervises N gateway processes forked with node:cluster, which share the listening
 * socket of APPHOST_GATEWAY_PORT.
 *
 * node:cluster rather than SO_REUSEPORT (`reusePort`): the primary keeps the listening socket, so a
 * process that dies loses only the connections it had accepted and one being handed to it at that
 * instant (with SO_REUSEPORT the connections waiting in its own accept queue are reset too, unless
 * net.ipv4.tcp_migrate_req is on, and a restarted one changes the kernel's hash groups);
 * round-robin hands each new connection to the next process, where the kernel's 4-tuple hash spreads
 * a proxy's few kept-alive connections unevenly; a port of 0 (tests, apphost dev) is one port for all;
 * and the IPC channel that supervision needs carries the readiness and metrics questions. Its cost is
 * the primary's hop per new connection, not per call (callers and proxies keep connections alive).
 *
 * The primary serves the pod's /healthz, /readyz and /metrics on APPHOST_OPS_PORT, asking each process
 * over IPC (each answer bounded by PROCESS_ANSWER_TIMEOUT_MS, questions.ts); the processes serve no ops port.
 */
import cluster, { type Worker } from 'node:cluster';
import { Counter, collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { type BackoffSettings, backoffDelay } from '../shared/backoff.ts';
import type { Logger } from '../shared/log.ts';
import { type ReadinessCheck, startOpsServer } from '../shared/ops.ts';
import {
  type GatewayEnv,
  gatewayShutdownBoundMs,
  MAX_GATEWAY_PROCESSES,
  type ProcessesSetting,
} from './config.ts';
import { createQuestions, type MetricsJson, mergedMetrics } from './questions.ts';
import type { GatewayProcess } from './serve.ts';

/** Delay before a process that exited is started again: 1 s doubling to 30 s. */
export const PROCESS_RESTART_BACKOFF: BackoffSettings = { baseDelayMs: 1_000, maxDelayMs: 30_000 };
/** A process that ran this long before it exited is restarted after the first delay again. */
export const PROCESS_STABLE_MS = 60_000;
/** The primary's own margin over the processes' shutdown bound (the chart's grace adds 5 s). */
export const PRIMARY_SHUTDOWN_MARGIN_MS = 2_000;
/** Env var the primary gives each process: its slot, 1..N (its metrics' `gateway_process` label). */
export const PROCESS_INDEX_ENV = 'APPHOST_GATEWAY_PROCESS_INDEX';
/** The label every series carries in several-process mode: the slot, or `primary`. */
export const PROCESS_LABEL = 'gateway_process';

/** How many processes `setting` means on a machine giving this process `parallelism` CPUs. */
export function gatewayProcessCount(setting: ProcessesSetting, parallelism: number): number {
  const n = setting === 'auto' ? parallelism : setting;
  return Math.max(1, Math.min(MAX_GATEWAY_PROCESSES, Math.floor(n)));
}

type Question = { type: 'apphost:ask'; id: number; what: 'readyz' | 'metrics' };
type Answer = {
  type: 'apphost:answer';
  id: number;
  failing?: string[];
  metrics?: MetricsJson;
};

const isAnswer = (m: unknown): m is Answer =>
  typeof m === 'object' && m !== null && (m as { type?: unknown }).type === 'apphost:answer';
const isQuestion = (m: unknown): m is Question =>
  typeof m === 'object' && m !== null && (m as { type?: unknown }).type === 'apphost:ask';

/**
 * In a process forked by the primary: answers its readiness and metrics questions from this
 * process's checks and registry, labels the metrics with the slot, and calls `onPrimaryGone` when the
 * IPC channel closes (the primary died: the process shuts down rather than serve unsupervised).
 */
export function answerPrimary(opts: {
  index: string;
  registry: Registry;
  failing(): Promise<string[]>;
  onPrimaryGone(): void;
}): void {
  opts.registry.setDefaultLabels({ [PROCESS_LABEL]: opts.index });
  const send = (a: Answer) => {
    if (process.connected) process.send?.(a);
  };
  process.on('message', (m: unknown) => {
    if (!isQuestion(m)) return;
    const answer =
      m.what === 'readyz'
        ? opts.failing().then((failing) => ({ failing }))
        : opts.registry.getMetricsAsJSON().then((metrics) => ({ metrics }));
    answer.then(
      (a) => send({ type: 'apphost:answer', id: m.id, ...a }),
      (err: unknown) => send({ type: 'apphost:answer', id: m.id, failing: [`error: ${String(err)}`] }),
    );
  });
  process.once('disconnect', () => opts.onPrimaryGone());
}

export interface GatewayProcesses {
  /** Resolves once every process has listened once (its HTTP server is up). */
  started(): Promise<void>;
  /** The shared HTTP port (known once a process listens). */
  port(): number | undefined;
  /** Processes listening now. */
  listening(): number;
  /** The pod's readiness: at least one process listening, and every listening one ready. */
  checks(): ReadinessCheck[];
  /** Every process's metrics and the primary's, one series per process (label `gateway_process`). */
  metrics(): Promise<Buffer>;
  readonly contentType: string;
  /** SIGTERM to every process (each drains within its own bound); SIGKILL to those left after `boundMs`. */
  stop(boundMs: number): Promise<void>;
}

interface Slot {
  index: number;
  worker: Worker | undefined;
  listening: boolean;
  failures: number;
  startedAt: number;
  restart: NodeJS.Timeout | undefined;
}

/** Forks `count` gateway processes (this process must be the cluster primary) and keeps them running. */
export function superviseGatewayProcesses(opts: {
  count: number;
  log: Logger;
  /** The primary's registry: its own metrics, merged into `metrics()`. */
  registry: Registry;
  /** Env for every process on top of the primary's. */
  env?: NodeJS.ProcessEnv;
  now?: () => number;
}): GatewayProcesses {
  const { log, registry } = opts;
  const now = opts.now ?? Date.now;
  registry.setDefaultLabels({ [PROCESS_LABEL]: 'primary' });
  // Round-robin by the primary (Node's default on Linux, stated so NODE_CLUSTER_SCHED_POLICY cannot change it).
  cluster.schedulingPolicy = cluster.SCHED_RR;
  const restarts = new Counter({
    name: 'apphost_gateway_process_restarts_total',
    help: 'Gateway processes of this pod started again after they exited',
    registers: [registry],
  });
  const slots: Slot[] = Array.from({ length: opts.count }, (_, i) => ({
    index: i + 1,
    worker: undefined,
    listening: false,
    failures: 0,
    startedAt: 0,
    restart: undefined,
  }));
  new Gauge({
    name: 'apphost_gateway_processes',
    help: 'Gateway processes of this pod listening on the shared port',
    registers: [registry],
    collect() {
      this.set(slots.filter((s) => s.listening).length);
    },
  });
  let stopping = false;
  let sharedPort: number | undefined;
  const questions = createQuestions<Answer, Worker>();
  let resolveStarted: () => void = () => {};
  const startedOnce = new Set<number>();
  const allStarted = new Promise<void>((r) => {
    resolveStarted = r;
  });

  const ask = (worker: Worker, what: Question['what']): Promise<Answer | undefined> =>
    questions.ask(worker, (id) => {
      if (!worker.isConnected()) return false;
      worker.send({ type: 'apphost:ask', id, what } satisfies Question);
      return true;
    });

  const start = (slot: Slot) => {
    slot.restart = undefined;
    if (stopping) return;
    const worker = cluster.fork({ ...opts.env, [PROCESS_INDEX_ENV]: String(slot.index) });
    slot.worker = worker;
    slot.listening = false;
    slot.startedAt = now();
    worker.on('listening', (address) => {
      slot.listening = true;
      sharedPort = address.port;
      startedOnce.add(slot.index);
      if (startedOnce.size === slots.length) resolveStarted();
    });
    worker.on('message', (m: unknown) => {
      if (isAnswer(m)) questions.answer(m.id, m);
    });
    worker.on('exit', (code, signal) => {
      slot.worker = undefined;
      slot.listening = false;
      questions.forget(worker);
      if (stopping) return;
      slot.failures = now() - slot.startedAt >= PROCESS_STABLE_MS ? 1 : slot.failures + 1;
      const delayMs = backoffDelay(slot.failures, PROCESS_RESTART_BACKOFF);
      log.warn(
        { process: slot.index, pid: worker.process.pid, code, signal, restartInMs: delayMs },
        'gateway process exited; starting it again',
      );
      restarts.inc();
      slot.restart = setTimeout(() => start(slot), delayMs);
    });
  };
  for (const slot of slots) start(slot);
  log.info({ processes: opts.count }, 'gateway processes started');

  const aggregatorContentType = registry.contentType;
  return {
    started: () => allStarted,
    port: () => sharedPort,
    listening: () => slots.filter((s) => s.listening).length,
    checks: () => [
      { name: 'a gateway process listening', check: () => slots.some((s) => s.listening) },
      ...slots.map((slot) => ({
        name: `gateway process ${slot.index}`,
        // A process that does not listen gets no connections; one that does must be ready.
        check: async () => {
          const worker = slot.worker;
          if (!slot.listening || !worker) return true;
          const a = await ask(worker, 'readyz');
          return a?.failing?.length === 0;
        },
      })),
    ],
    metrics: () =>
      mergedMetrics(
        registry,
        slots.map(async (s) => (s.worker ? (await ask(s.worker, 'metrics'))?.metrics : undefined)),
      ),
    contentType: aggregatorContentType,
    async stop(boundMs) {
      stopping = true;
      const running: Worker[] = [];
      for (const slot of slots) {
        clearTimeout(slot.restart);
        if (slot.worker) running.push(slot.worker);
      }
      const exited = running.map(
        (w) => new Promise<void>((resolve) => (w.isDead() ? resolve() : w.once('exit', () => resolve()))),
      );
      for (const w of running) w.process.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<'bound'>((r) => {
        timer = setTimeout(() => r('bound'), boundMs);
      });
      const outcome = await Promise.race([Promise.all(exited), bound]);
      clearTimeout(timer);
      if (outcome === 'bound') {
        const left = running.filter((w) => !w.isDead());
        log.error(
          { processes: left.map((w) => w.process.pid), boundMs },
          'gateway processes still running after the bound: killing them',
        );
        for (const w of left) w.process.kill('SIGKILL');
        await Promise.all(exited);
        throw new Error(`${left.length} gateway process(es) did not stop within ${boundMs} ms`);
      }
    },
  };
}

type Step = { name: string; run: () => Promise<void> };

/** What a gateway entrypoint (main.ts) hands to onShutdownSignal, whichever role this process has. */
export interface GatewayRun {
  /** `single`: APPHOST_GATEWAY_PROCESSES=1; `primary`: the supervisor; `process`: one of N. */
  role: 'single' | 'primary' | 'process';
  /** The run API's port (the primary knows it once a process listens). */
  port(): number | undefined;
  /** Resolves once the run API is served (the primary: by every process once). */
  started(): Promise<void>;
  shutdownBoundMs: number;
  shutdownSteps: Step[];
  /**
   * A process of several stops on SIGTERM only, which the primary forwards: a terminal's Ctrl-C
   * reaches the whole process group, and a second signal would cut its drain short.
   */
  signals: { stop: NodeJS.Signals[]; ignore?: NodeJS.Signals[] };
}

/**
 * Runs the gateway in the role this process has: the whole gateway (`processes` = 1), the primary
 * of `processes` gateway processes, or one of them (a cluster worker). `serve` builds one gateway
 * process (serveGateway plus what main.ts adds); `processIndex` is the slot the primary gave this
 * process (PROCESS_INDEX_ENV).
 */
export async function runGateway(opts: {
  env: GatewayEnv;
  log: Logger;
  processes: number;
  processIndex?: string;
  serve(o: { ops: boolean }): Promise<{ proc: GatewayProcess; steps?: Step[] }>;
  /** Called in a process whose primary is gone: it should shut down as on SIGTERM. */
  onPrimaryGone(): void;
}): Promise<GatewayRun> {
  const { env, log } = opts;
  if (cluster.isWorker) {
    const { proc, steps = [] } = await opts.serve({ ops: false });
    answerPrimary({
      index: opts.processIndex ?? String(cluster.worker?.id ?? '?'),
      registry: proc.registry,
      failing: proc.failing,
      onPrimaryGone: opts.onPrimaryGone,
    });
    return {
      role: 'process',
      port: proc.port,
      started: async () => {},
      shutdownBoundMs: proc.shutdownBoundMs,
      shutdownSteps: [...proc.shutdownSteps(), ...steps],
      signals: { stop: ['SIGTERM'], ignore: ['SIGINT'] },
    };
  }
  if (opts.processes <= 1) {
    const { proc, steps = [] } = await opts.serve({ ops: true });
    return {
      role: 'single',
      port: proc.port,
      started: async () => {},
      shutdownBoundMs: proc.shutdownBoundMs,
      shutdownSteps: [...proc.shutdownSteps(), ...steps],
      signals: { stop: ['SIGTERM', 'SIGINT'] },
    };
  }
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const processes = superviseGatewayProcesses({ count: opts.processes, log, registry });
  const ops = await startOpsServer({
    port: env.APPHOST_OPS_PORT,
    registry: processes,
    checks: processes.checks(),
  });
  const boundMs = gatewayShutdownBoundMs(env);
  return {
    role: 'primary',
    port: processes.port,
    started: processes.started,
    shutdownBoundMs: boundMs + PRIMARY_SHUTDOWN_MARGIN_MS,
    shutdownSteps: [
      { name: 'readyz→503', run: async () => ops.drain() },
      { name: 'stop gateway processes', run: () => processes.stop(boundMs) },
      { name: 'close ops', run: () => ops.close() },
    ],
    signals: { stop: ['SIGTERM', 'SIGINT'] },
  };
}
