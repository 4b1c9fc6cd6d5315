/**
 * Keeps one process per app running: restarts a crashed one with exponential backoff, restarts on
 * request (a file changed), and stops each with SIGTERM, then SIGKILL once its grace period is over.
 */
import type { Clock } from '../shared/clock.ts';
import { systemClock } from '../shared/clock.ts';
import type { Logger } from '../shared/log.ts';
import type { ChildHandle, ExitInfo, ProcessSpec, Spawner } from './spawner.ts';

export interface SupervisorSettings {
  /** First restart delay after a crash; doubles per consecutive crash. */
  backoffInitialMs: number;
  /** Upper bound of the restart delay. */
  backoffMaxMs: number;
  /** A process that ran this long before exiting counts as healthy: the backoff starts over. */
  stableAfterMs: number;
  /** Extra time after an app's grace period before SIGKILL. */
  killMarginMs: number;
}

export const DEFAULT_SUPERVISOR_SETTINGS: SupervisorSettings = {
  backoffInitialMs: 500,
  backoffMaxMs: 30_000,
  stableAfterMs: 10_000,
  killMarginMs: 2_000,
};

export interface SupervisedProcess {
  name: string;
  /** Prefix of its output lines (`[label] ...`); the name when absent. */
  label?: string;
  /** Also hears each output line, unprefixed. */
  onLine?: (line: string) => void;
  /** Read at every start, so a restart picks up a changed manifest. */
  spec: () => ProcessSpec;
  /** How long the process may drain after SIGTERM. */
  graceMs: () => number;
}

export interface ProcessStatus {
  name: string;
  pid: number | undefined;
  running: boolean;
  /** How many times the process was started. */
  starts: number;
  /** Crashes since the last stable run (drives the backoff). */
  consecutiveCrashes: number;
}

export interface Supervisor {
  add(proc: SupervisedProcess): void;
  /** Stops the app's process (gracefully) and starts it again at once, backoff reset. */
  restart(name: string): Promise<void>;
  remove(name: string): Promise<void>;
  stopAll(): Promise<void>;
  status(name: string): ProcessStatus | undefined;
  names(): string[];
}

/** Delay before restart number `crashes` (1-based). Pure, for the tests. */
export function backoffDelay(
  crashes: number,
  s: Pick<SupervisorSettings, 'backoffInitialMs' | 'backoffMaxMs'>,
): number {
  if (crashes <= 0) return 0;
  return Math.min(s.backoffMaxMs, s.backoffInitialMs * 2 ** Math.min(crashes - 1, 30));
}

interface Entry {
  proc: SupervisedProcess;
  child: ChildHandle | undefined;
  starts: number;
  crashes: number;
  /** Set while the supervisor itself stops the process (restart/remove/stopAll): no crash handling. */
  stopping: Promise<void> | undefined;
  removed: boolean;
  /** Aborts a pending backoff sleep. */
  wait: AbortController | undefined;
  /** Bumped on every (re)start so a stale exit handler does nothing. */
  generation: number;
}

export interface SupervisorDeps {
  spawner: Spawner;
  log: Logger;
  /** Where each output line goes, already prefixed with `[<app>] `. */
  output: (line: string) => void;
  clock?: Clock;
  settings?: Partial<SupervisorSettings>;
  /** Called after each start (e.g. to forget cached facts about the previous process). */
  onStart?: (name: string, pid: number | undefined) => void;
  /** Each output line, unprefixed, with the app (its label) and the process that wrote it (the logs API keeps them). */
  onOutput?: (app: string, pid: number | undefined, stream: 'stdout' | 'stderr', line: string) => void;
}

export function createSupervisor(deps: SupervisorDeps): Supervisor {
  const clock = deps.clock ?? systemClock;
  const s: SupervisorSettings = { ...DEFAULT_SUPERVISOR_SETTINGS, ...deps.settings };
  const entries = new Map<string, Entry>();
  let closed = false;

  const start = (e: Entry) => {
    if (e.removed || closed) return;
    const spec = e.proc.spec();
    const generation = ++e.generation;
    const startedAt = clock.now();
    e.starts++;
    const child = deps.spawner.spawn(spec, (stream, line) => {
      e.proc.onLine?.(line);
      deps.output(`[${e.proc.label ?? e.proc.name}] ${line}`);
      deps.onOutput?.(e.proc.label ?? e.proc.name, child.pid, stream, line);
    });
    e.child = child;
    deps.log.info(
      { app: e.proc.label ?? e.proc.name, process: e.proc.name, pid: child.pid, start: e.starts },
      'app process started',
    );
    deps.onStart?.(e.proc.name, child.pid);
    void child.exited.then((exit) => {
      // Whatever it spawned and left behind (e.g. a helper ignoring SIGTERM) must not outlive it,
      // whether it crashed or was stopped: its process group gets a SIGKILL.
      child.kill('SIGKILL');
      onExit(e, generation, exit, clock.now() - startedAt);
    });
  };

  const onExit = (e: Entry, generation: number, exit: ExitInfo, ranMs: number) => {
    if (generation !== e.generation) return;
    e.child = undefined;
    if (e.stopping || e.removed || closed) return;
    e.crashes = ranMs >= s.stableAfterMs ? 1 : e.crashes + 1;
    const delay = backoffDelay(e.crashes, s);
    deps.log.warn(
      {
        app: e.proc.label ?? e.proc.name,
        process: e.proc.name,
        code: exit.code,
        signal: exit.signal,
        err: exit.error?.message,
        restartInMs: delay,
      },
      'app process exited; restarting',
    );
    const wait = new AbortController();
    e.wait = wait;
    clock.sleep(delay, wait.signal).then(
      () => {
        if (e.wait === wait) e.wait = undefined;
        if (generation === e.generation && !e.stopping) start(e);
      },
      () => {},
    );
  };

  const stop = async (e: Entry) => {
    e.wait?.abort();
    e.wait = undefined;
    const child = e.child;
    if (!child) return;
    const graceMs = e.proc.graceMs() + s.killMarginMs;
    child.kill('SIGTERM');
    const kill = new AbortController();
    clock.sleep(graceMs, kill.signal).then(
      () => {
        deps.log.warn(
          { app: e.proc.label ?? e.proc.name, process: e.proc.name, graceMs },
          'app process ignored SIGTERM past its grace period: SIGKILL',
        );
        child.kill('SIGKILL');
      },
      () => {},
    );
    await child.exited;
    kill.abort();
    e.child = undefined;
  };

  const stopOnce = (e: Entry): Promise<void> => {
    e.stopping ??= stop(e).finally(() => {
      e.stopping = undefined;
    });
    return e.stopping;
  };

  return {
    add(proc) {
      if (entries.has(proc.name)) throw new Error(`process '${proc.name}' is already supervised`);
      const e: Entry = {
        proc,
        child: undefined,
        starts: 0,
        crashes: 0,
        stopping: undefined,
        removed: false,
        wait: undefined,
        generation: 0,
      };
      entries.set(proc.name, e);
      start(e);
    },
    async restart(name) {
      const e = entries.get(name);
      if (!e || e.removed) return;
      await stopOnce(e);
      e.crashes = 0;
      if (!e.child) start(e);
    },
    async remove(name) {
      const e = entries.get(name);
      if (!e) return;
      e.removed = true;
      await stopOnce(e);
      entries.delete(name);
    },
    async stopAll() {
      closed = true;
      await Promise.all([...entries.values()].map((e) => stopOnce(e)));
    },
    status(name) {
      const e = entries.get(name);
      if (!e) return undefined;
      return {
        name,
        pid: e.child?.pid,
        running: e.child !== undefined,
        starts: e.starts,
        consecutiveCrashes: e.crashes,
      };
    },
    names: () => [...entries.keys()],
  };
}
