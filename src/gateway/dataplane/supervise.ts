/**
 * Runs the native data plane as a child of the gateway's Node process (docs/design/native-data-plane.md
 * §1, §4): spawns the binary with the control channel on its fd 3, checks its `hello`, sends `config`
 * and then the state feed (a snapshot, then deltas; a `resync` answered with a snapshot), pings it, and
 * respawns it with a backoff when it exits. Its readiness is one of the pod's /readyz checks; its
 * series come to a scrape of /metrics through `askMetrics` (design §5), and its CPU and memory are read
 * from the running child (apphost_gateway_dataplane_{cpu_seconds_total,resident_memory_bytes}).
 *
 * Side effects (the spawn, the clock, timers) come in through narrow interfaces; nothing here reads the
 * environment. Nothing on the channel is logged but message types, codes and the builds.
 */
import { spawn as spawnProcess } from 'node:child_process';
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { Counter, Gauge, type Registry } from 'prom-client';
import { type BackoffSettings, backoffDelay } from '../../shared/backoff.ts';
import type { Logger } from '../../shared/log.ts';
import type { ReadinessCheck } from '../../shared/ops.ts';
import { createQuestions, type MetricsJson } from '../questions.ts';
import type { StateFeed } from './feed.ts';
import type { ProcessUsage } from './proc-usage.ts';
import {
  type ConfigMessage,
  DATAPLANE_PROTOCOL_VERSION,
  encodeMessage,
  FrameDecoder,
  type LoadMessage,
  type Message,
  ProtocolError,
  ProtocolErrorCode,
  parsePayload,
  type RecordsMessage,
} from './protocol.ts';

/** Between two pings of the data plane. */
export const DATAPLANE_PING_INTERVAL_MS = 500;
/**
 * Bound on the data plane's answer to a ping: past it, the data plane is not ready (/readyz 503) until a
 * pong comes. The same bound as a gateway process's answer to its primary (PROCESS_ANSWER_TIMEOUT_MS).
 */
export const DATAPLANE_PONG_TIMEOUT_MS = 2_000;
/**
 * A running child whose last `pong` is this old is killed (SIGKILL) and started again after the usual
 * backoff: stuck (a deadlock, a livelock), it would otherwise keep the pod unready for ever, since the
 * pod's liveness probe (/healthz) is Node's. Twice what kubelet allows a stuck Node in node mode (the
 * chart's liveness: every 10 s, 3 failures), so that a stop the cluster suite makes to see the pod go
 * unready (test/cluster/dataplane.test.ts, up to 45 s) is not taken for a stuck process.
 */
export const DATAPLANE_WEDGED_MS = 60_000;
/** Delay before a data plane that exited is started again: 1 s doubling to 30 s (PROCESS_RESTART_BACKOFF). */
export const DATAPLANE_RESTART_BACKOFF: BackoffSettings = { baseDelayMs: 1_000, maxDelayMs: 30_000 };
/** A data plane that ran this long before it exited is restarted after the first delay again. */
export const DATAPLANE_STABLE_MS = 60_000;
/**
 * Added to APPHOST_GATEWAY_DRAIN_TIMEOUT_MS when waiting for the data plane to drain and exit after
 * `drain{drain}` (its own drain is bounded by that setting); past it, SIGKILL.
 */
export const DATAPLANE_DRAIN_MARGIN_MS = 2_000;
/** Bound on the exit after SIGKILL (the kernel's, in practice at once). */
export const DATAPLANE_KILL_WAIT_MS = 2_000;

/** One running child: its control channel and its life. */
export interface DataPlaneChild {
  readonly pid: number | undefined;
  /** Fd 3 of the child. */
  readonly channel: Duplex;
  kill(signal: NodeJS.Signals): void;
  /** Called once, when the child has exited (or could not be started: code null, signal null, error set). */
  onExit(cb: (code: number | null, signal: NodeJS.Signals | null, error?: Error) => void): void;
}

export type SpawnDataPlane = () => DataPlaneChild;

/**
 * The real spawn: `bin` with stdin ignored, stdout/stderr inherited (its access and error lines join
 * Node's) and fd 3 a Unix socketpair (the control channel). With `onConnection`, fd 4 is Node's IPC
 * channel too (json; Node puts `NODE_CHANNEL_FD` in its environment), on which the child hands over
 * callers' connections whole in Node's own handle-passing format (design §3a), each given to
 * `onConnection` as a net.Socket; without, the child has no such channel and serves every connection.
 * `env` is the child's whole environment besides those (the data plane reads only
 * APPHOST_GATEWAY_DATA_PLANE_THREADS from it; nothing secret is passed).
 */
export function spawnDataPlane(
  bin: string,
  env: Record<string, string>,
  onConnection?: (socket: Socket) => void,
): SpawnDataPlane {
  return () => {
    const child = spawnProcess(bin, [], {
      stdio: ['ignore', 'inherit', 'inherit', 'pipe', ...(onConnection ? (['ipc'] as const) : [])],
      serialization: 'json',
      env,
    });
    // Node's child_process turns the child's `NODE_HANDLE` line and its descriptor into a net.Socket (and
    // ACKs it); anything else on the channel is not ours: a stray handle is closed.
    if (onConnection)
      child.on('message', (msg: unknown, handle: unknown) => {
        if (handle instanceof Socket && (msg as { apphost?: unknown } | null)?.apphost === 'connection')
          onConnection(handle);
        else (handle as { destroy?: () => void } | undefined)?.destroy?.();
      });
    let exited = false;
    const listeners: Array<(code: number | null, signal: NodeJS.Signals | null, error?: Error) => void> = [];
    const done = (code: number | null, signal: NodeJS.Signals | null, error?: Error) => {
      if (exited) return;
      exited = true;
      for (const l of listeners) l(code, signal, error);
    };
    // 'close' (not 'exit'): after the child's stdio, fd 3 included, has closed too.
    child.once('close', (code, signal) => done(code, signal));
    child.once('error', (err) => done(null, null, err));
    return {
      pid: child.pid,
      channel: child.stdio[3] as Duplex,
      kill: (signal) => {
        child.kill(signal);
      },
      onExit: (cb) => {
        listeners.push(cb);
      },
    };
  };
}

/** The clock and timers the supervisor uses (tests pass their own). */
export interface SupervisorTimers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: SupervisorTimers = {
  now: Date.now,
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

export interface DataPlaneSupervisor {
  /** Spawns the first child. */
  start(): void;
  /** Running, `hello` matched, `ready` for the feed's gen, a pong within DATAPLANE_PONG_TIMEOUT_MS. */
  ready(): boolean;
  /** `{ name: 'data plane' }`, for serve.ts's /readyz checks. */
  readonly check: ReadinessCheck;
  /** Shutdown step 2: `drain{handover}` (the data plane closes its listener); no respawn from now on. */
  handover(): void;
  /**
   * Shutdown step 3: `drain{drain}`, then waits for the child's exit up to `drainTimeoutMs` +
   * DATAPLANE_DRAIN_MARGIN_MS, then SIGKILL. Also what `stop` is when nothing was handed over.
   */
  drain(): Promise<void>;
  /** Test hook: Node closes the channel as if it had died (the child drains and exits; it is respawned). */
  closeChannel(): void;
  /** The running child's pid. */
  pid(): number | undefined;
  /** Children started after the first. */
  restarts(): number;
  /**
   * The running child's series for a scrape (`ask-metrics`, design §5), waiting at most
   * PROCESS_ANSWER_TIMEOUT_MS. When it does not answer in time, the counters and histograms of its last
   * answer (`keptSeries`), so that a missed scrape never lowers a counter the pod's /metrics sums; none
   * when no child runs or the one asked has exited (a new child starts from 0: a genuine reset).
   */
  askMetrics(): Promise<MetricsJson | undefined>;
}

interface Run {
  child: DataPlaneChild;
  startedAt: number;
  helloOk: boolean;
  readyGen: string | undefined;
  lastPongAt: number;
  pingId: number;
  pingTimer: unknown;
  exited: boolean;
  exitWaiters: Array<() => void>;
  drained: boolean;
  /** This child's last answer to `ask-metrics`. */
  lastMetrics: MetricsJson | undefined;
}

/**
 * What a scrape the child did not answer keeps of its last answer: its counters and histograms, which
 * only grow while the child runs, so that the summed series do not dip (Prometheus would read a dip as a
 * counter reset, and `rate()` would jump by the whole value); its gauges are left out (a stale level).
 */
export function keptSeries(last: MetricsJson | undefined): MetricsJson | undefined {
  // prom-client types `type` as a numeric enum; its JSON (and the frame's) carries the name.
  return last?.filter((m) => ['counter', 'histogram'].includes(m.type as unknown as string));
}

export function superviseDataPlane(opts: {
  spawn: SpawnDataPlane;
  /** The `config` frame: the settings Node parsed (`dataPlaneConfig`). */
  config: ConfigMessage;
  feed: StateFeed;
  log: Logger;
  registry: Registry;
  /** APPHOST_GATEWAY_DRAIN_TIMEOUT_MS: the data plane's own drain bound. */
  drainTimeoutMs: number;
  /** The child's CPU and memory, read at a scrape (proc-usage.ts). */
  usage: ProcessUsage;
  /** Replaces DATAPLANE_WEDGED_MS (tests). */
  wedgedMs?: number;
  /** The data plane's `load` (every loadReportIntervalMs): the load reporter's `publish`. */
  onLoad?: (apps: LoadMessage['apps']) => void;
  /** Its admitted sync-call records (`records`): the gateway's `recordSyncCall`, each. */
  onRecords?: (records: RecordsMessage['records']) => void;
  timers?: SupervisorTimers;
}): DataPlaneSupervisor {
  const { feed, log } = opts;
  const timers = opts.timers ?? realTimers;
  let run: Run | undefined;
  let stopping = false;
  let failures = 0;
  let restarts = 0;
  let started = false;
  let respawn: unknown;
  /** Metrics questions to the child, by id; a run's are given up when it ends. */
  const questions = createQuestions<MetricsJson, Run>({ timers });

  const restartsTotal = new Counter({
    name: 'apphost_gateway_dataplane_restarts_total',
    help: 'Native data plane processes started again after one exited',
    registers: [opts.registry],
  });
  const ready = (): boolean =>
    !!run &&
    !run.exited &&
    run.helloOk &&
    run.readyGen === feed.gen &&
    timers.now() - run.lastPongAt <= DATAPLANE_PONG_TIMEOUT_MS;
  new Gauge({
    name: 'apphost_gateway_dataplane_up',
    help: 'Whether the native data plane is ready: running, its hello matched, its state applied, answering pings',
    registers: [opts.registry],
    collect() {
      this.set(ready() ? 1 : 0);
    },
  });
  /** The pid of a child that has not exited. */
  const livePid = () => (run && !run.exited ? run.child.pid : undefined);
  new Counter({
    name: 'apphost_gateway_dataplane_cpu_seconds_total',
    help: 'CPU time (user + system) of the running native data plane process, in seconds; a new process (apphost_gateway_dataplane_restarts_total) starts again from 0',
    registers: [opts.registry],
    async collect() {
      const pid = livePid();
      const seconds = pid === undefined ? undefined : await opts.usage.cpuSeconds(pid);
      this.reset();
      if (seconds) this.inc(seconds);
    },
  });
  new Gauge({
    name: 'apphost_gateway_dataplane_resident_memory_bytes',
    help: 'Resident memory of the running native data plane process, in bytes (0: none running)',
    registers: [opts.registry],
    async collect() {
      const pid = livePid();
      this.set((pid === undefined ? undefined : await opts.usage.residentBytes(pid)) ?? 0);
    },
  });
  new Gauge({
    name: 'apphost_gateway_dataplane_state_seq',
    help: 'The seq of the last state frame sent to the native data plane (one counter per gateway start)',
    registers: [opts.registry],
    collect() {
      this.set(feed.seq);
    },
  });

  const send = (r: Run, m: Message) => {
    if (r.exited || r.child.channel.destroyed) return;
    r.child.channel.write(encodeMessage(m));
  };

  const wedgedMs = opts.wedgedMs ?? DATAPLANE_WEDGED_MS;
  const ping = (r: Run) => {
    if (r.exited) return;
    // Unanswered for DATAPLANE_WEDGED_MS: stuck. Killed (its exit respawns it), unless Node is stopping
    // (drain() has its own bound).
    if (r.helloOk && !stopping && timers.now() - r.lastPongAt > wedgedMs) {
      log.error(
        { pid: r.child.pid, sincePongMs: timers.now() - r.lastPongAt },
        'data plane stopped answering pings: killed',
      );
      endRun(r);
      r.child.kill('SIGKILL');
      return;
    }
    r.pingId += 1;
    send(r, { type: 'ping', id: r.pingId });
    r.pingTimer = timers.setTimeout(() => ping(r), DATAPLANE_PING_INTERVAL_MS);
  };

  /** A frame the data plane sent that breaks the protocol: close the channel (the child exits). */
  const refuse = (r: Run, err: ProtocolError) => {
    log.error(
      { code: err.code, err: err.message, pid: r.child.pid },
      'data plane broke the control protocol',
    );
    endRun(r);
    r.child.channel.destroy();
  };

  /** This child no longer serves: unready, no feed, no pings. */
  const endRun = (r: Run) => {
    r.helloOk = false;
    r.readyGen = undefined;
    timers.clearTimeout(r.pingTimer);
    questions.forget(r);
    if (run === r) feed.disconnect();
  };

  const onMessage = (r: Run, m: Message) => {
    if (!r.helloOk) {
      if (m.type !== 'hello')
        throw new ProtocolError(ProtocolErrorCode.UnexpectedMessage, `${m.type} before hello`);
      r.helloOk = true;
      r.lastPongAt = timers.now();
      log.info({ pid: r.child.pid, build: m.build, protocol: m.protocol }, 'data plane started');
      send(r, opts.config);
      feed.connect((frame) => send(r, frame));
      ping(r);
      return;
    }
    switch (m.type) {
      case 'pong':
        r.lastPongAt = timers.now();
        return;
      case 'ready':
        if (m.gen === feed.gen) {
          if (r.readyGen !== m.gen) log.info({ pid: r.child.pid, seq: m.seq }, 'data plane ready');
          r.readyGen = m.gen;
        }
        return;
      case 'resync':
        log.warn(
          { pid: r.child.pid, gen: m.gen, seq: m.seq, sent: feed.seq },
          'data plane asked for a resync',
        );
        feed.resync();
        return;
      case 'drained':
        r.drained = true;
        return;
      case 'metrics':
        // Checked as prom-client's JSON by the frame's schema; an answer whose question was given up is dropped.
        questions.answer(m.id, m.metrics as unknown as MetricsJson);
        return;
      case 'load':
        opts.onLoad?.(m.apps);
        return;
      case 'records':
        opts.onRecords?.(m.records);
        return;
      case 'hello':
        throw new ProtocolError(ProtocolErrorCode.UnexpectedMessage, 'a second hello');
    }
  };

  const spawnOne = () => {
    respawn = undefined;
    if (stopping) return;
    let child: DataPlaneChild;
    try {
      child = opts.spawn();
    } catch (err) {
      onExit(undefined, null, null, err as Error);
      return;
    }
    const r: Run = {
      child,
      startedAt: timers.now(),
      helloOk: false,
      readyGen: undefined,
      lastPongAt: 0,
      pingId: 0,
      pingTimer: undefined,
      exited: false,
      exitWaiters: [],
      drained: false,
      lastMetrics: undefined,
    };
    run = r;
    const decoder = new FrameDecoder();
    child.channel.on('data', (chunk: Buffer) => {
      if (r.exited || r.child.channel.destroyed) return;
      try {
        decoder.push(chunk);
        for (let p = decoder.next(); p; p = decoder.next()) {
          const firstFrame = !r.helloOk;
          try {
            onMessage(r, parsePayload(p, 'node'));
          } catch (err) {
            if (!(firstFrame && err instanceof ProtocolError)) throw err;
            // The first frame refused: logged with the builds (once), the child killed.
            logMismatch(r, p, err);
            endRun(r);
            r.child.channel.destroy();
            return;
          }
        }
      } catch (err) {
        if (err instanceof ProtocolError) refuse(r, err);
        else throw err;
      }
    });
    child.channel.on('end', () => {
      try {
        decoder.finish();
      } catch (err) {
        if (err instanceof ProtocolError) refuse(r, err);
      }
      endRun(r);
    });
    // A write after the child died (EPIPE) or a reset: the exit that follows is what counts.
    child.channel.on('error', () => endRun(r));
    child.onExit((code, signal, error) => onExit(r, code, signal, error));
  };

  /** The first frame was refused: log the builds for a version skew (never the frame otherwise). */
  const logMismatch = (r: Run, payload: Buffer, err: ProtocolError) => {
    let build: unknown;
    let protocol: unknown;
    try {
      const v = JSON.parse(payload.toString()) as { type?: unknown; build?: unknown; protocol?: unknown };
      if (v.type === 'hello') ({ build, protocol } = v);
    } catch {}
    log.error(
      {
        code: err.code,
        pid: r.child.pid,
        dataPlane: {
          protocol: typeof protocol === 'number' ? protocol : undefined,
          build: typeof build === 'string' ? build.slice(0, 100) : undefined,
        },
        gateway: { protocol: DATAPLANE_PROTOCOL_VERSION },
      },
      'data plane speaks another protocol: killed, not ready (fail closed)',
    );
    r.child.kill('SIGKILL');
  };

  const onExit = (r: Run | undefined, code: number | null, signal: NodeJS.Signals | null, error?: Error) => {
    if (r) {
      r.exited = true;
      endRun(r);
      for (const w of r.exitWaiters.splice(0)) w();
      if (run === r) run = undefined;
    }
    const ranMs = r ? timers.now() - r.startedAt : 0;
    if (stopping) {
      log.info({ code, signal, drained: r?.drained }, 'data plane exited');
      return;
    }
    failures = ranMs >= DATAPLANE_STABLE_MS ? 1 : failures + 1;
    const delayMs = backoffDelay(failures, DATAPLANE_RESTART_BACKOFF);
    log.error(
      { code, signal, err: error?.message, ranMs, restartInMs: delayMs },
      error ? 'data plane could not be started' : 'data plane exited',
    );
    respawn = timers.setTimeout(() => {
      restarts += 1;
      restartsTotal.inc();
      spawnOne();
    }, delayMs);
  };

  const exited = (r: Run, boundMs: number): Promise<boolean> =>
    new Promise((resolve) => {
      if (r.exited) return resolve(true);
      const t = timers.setTimeout(() => resolve(false), boundMs);
      r.exitWaiters.push(() => {
        timers.clearTimeout(t);
        resolve(true);
      });
    });

  const stopRespawns = () => {
    stopping = true;
    if (respawn !== undefined) timers.clearTimeout(respawn);
    respawn = undefined;
  };

  return {
    start() {
      if (started) return;
      started = true;
      spawnOne();
    },
    ready,
    check: { name: 'data plane', check: ready },
    handover() {
      stopRespawns();
      if (run) send(run, { type: 'drain', phase: 'handover' });
    },
    async drain() {
      stopRespawns();
      const r = run;
      if (!r) return;
      send(r, { type: 'drain', phase: 'drain' });
      if (await exited(r, opts.drainTimeoutMs + DATAPLANE_DRAIN_MARGIN_MS)) return;
      log.warn(
        { pid: r.child.pid, boundMs: opts.drainTimeoutMs + DATAPLANE_DRAIN_MARGIN_MS },
        'data plane did not exit after its drain: killed',
      );
      r.child.kill('SIGKILL');
      await exited(r, DATAPLANE_KILL_WAIT_MS);
    },
    closeChannel() {
      if (!run) return;
      endRun(run);
      run.child.channel.end();
    },
    pid: () => run?.child.pid,
    restarts: () => restarts,
    async askMetrics() {
      const r = run;
      if (!r || r.exited || !r.helloOk) return undefined;
      const answer = await questions.ask(r, (id) => {
        if (!r.helloOk || r.child.channel.destroyed) return false;
        send(r, { type: 'ask-metrics', id });
        return true;
      });
      if (answer) r.lastMetrics = answer;
      else if (!r.exited) return keptSeries(r.lastMetrics);
      return answer;
    },
  };
}
