/** Process spawning behind a narrow interface, so the supervisor's decisions are testable. */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface ProcessSpec {
  command: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be started at all (e.g. ENOENT). */
  error?: Error;
}

export interface ChildHandle {
  readonly pid: number | undefined;
  kill(signal: NodeJS.Signals): void;
  readonly exited: Promise<ExitInfo>;
}

export type OutputLine = (stream: 'stdout' | 'stderr', line: string) => void;

export interface Spawner {
  spawn(spec: ProcessSpec, onLine: OutputLine): ChildHandle;
}

export const nodeSpawner: Spawner = {
  spawn(spec, onLine) {
    const child = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      // Own process group: a terminal's Ctrl-C reaches only us, and we stop children in order
      // (gateway drained first, NATS last) instead of all of them dying at once.
      detached: true,
    });
    for (const stream of ['stdout', 'stderr'] as const) {
      const source = child[stream];
      if (source)
        createInterface({ input: source, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (l) =>
          onLine(stream, l),
        );
    }
    const exited = new Promise<ExitInfo>((resolve) => {
      let spawnError: Error | undefined;
      child.once('error', (err) => {
        spawnError = err;
        // A process that never started emits no 'exit'.
        if (child.pid === undefined) resolve({ code: null, signal: null, error: err });
      });
      child.once('exit', (code, signal) =>
        resolve({ code, signal, ...(spawnError ? { error: spawnError } : {}) }),
      );
    });
    return {
      pid: child.pid,
      kill: (signal) => {
        if (child.pid === undefined) return;
        // The whole group: whatever the app's code spawned goes with it, even after the leader has
        // exited (its group lives on while any member does; ESRCH once it is empty).
        try {
          process.kill(-child.pid, signal);
        } catch {
          if (child.exitCode === null && child.signalCode === null) child.kill(signal);
        }
      },
      exited,
    };
  },
};

export interface TrackingSpawner extends Spawner {
  /** SIGKILLs every child still alive; synchronous, for a last-resort `process.on('exit')`. */
  killAll(): void;
  /** Pids of the children still alive. */
  live(): number[];
}

/**
 * Remembers live children so nothing outlives this process even when a graceful stop is cut short;
 * `onChange` hears the live pids after every start and exit.
 */
export function trackingSpawner(
  inner: Spawner,
  onChange: (pids: number[]) => void = () => {},
): TrackingSpawner {
  const live = new Set<ChildHandle>();
  const pids = () => [...live].map((c) => c.pid).filter((p): p is number => p !== undefined);
  return {
    spawn(spec, onLine) {
      const child = inner.spawn(spec, onLine);
      live.add(child);
      onChange(pids());
      void child.exited.then(() => {
        live.delete(child);
        onChange(pids());
      });
      return child;
    },
    killAll() {
      for (const c of live) c.kill('SIGKILL');
    },
    live: pids,
  };
}
