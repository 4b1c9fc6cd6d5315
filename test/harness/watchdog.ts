/**
 * Kills what a test started even when the test process itself is killed (SIGKILL included): a detached
 * shell loop watches our pid and, once it is gone, SIGKILLs every pid still recorded in `dir` (one file
 * per process, rewritten on each restart). Tests that signal their children (chaos) use it instead of
 * the per-child wrapper of process.ts, so the pids they signal are the real processes.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Watchdog {
  /** Records (or, with undefined, forgets) the pid of the process called `name`. */
  track(name: string, pid: number | undefined): void;
  /** SIGKILLs every tracked process now (SIGCONT first, so a stopped one dies too). */
  killAll(): void;
  stop(): void;
}

export function startWatchdog(dir: string): Watchdog {
  mkdirSync(dir, { recursive: true });
  const pids = new Map<string, number>();
  const script = `trap '' INT TERM HUP; while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; for f in "${dir}"/*.pid; do [ -f "$f" ] || continue; p=$(cat "$f"); kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done`;
  const dog = spawn('bash', ['-c', script], { detached: true, stdio: 'ignore' });
  dog.unref();
  const file = (name: string) => join(dir, `${name.replace(/[^\w.-]/g, '_')}.pid`);
  return {
    track(name, pid) {
      if (pid === undefined) {
        pids.delete(name);
        rmSync(file(name), { force: true });
      } else {
        pids.set(name, pid);
        writeFileSync(file(name), String(pid));
      }
    },
    killAll() {
      for (const [name, pid] of pids) {
        for (const sig of ['SIGCONT', 'SIGKILL'] as const) {
          try {
            process.kill(pid, sig);
          } catch {
            // already gone
          }
        }
        rmSync(file(name), { force: true });
      }
      pids.clear();
    },
    stop() {
      this.killAll();
      if (dog.pid) {
        try {
          process.kill(dog.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    },
  };
}
