/** Running a build command as a child process group, line by line, with a bound and an abort. */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface CommandOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** The process group is killed after this long. */
  timeoutMs: number;
  signal?: AbortSignal;
  onLine?: (line: string) => void;
}

export interface CommandResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  aborted: boolean;
  /** The command could not be started at all. */
  error?: Error;
}

export interface CommandRunner {
  run(command: string, args: readonly string[], opts: CommandOptions): Promise<CommandResult>;
}

export const nodeCommandRunner: CommandRunner = {
  run(command, args, opts) {
    return new Promise((resolve) => {
      // Own process group: a timeout or abort stops pip and whatever build it started (setup.py, cc).
      const child = spawn(command, args, {
        cwd: opts.cwd,
        env: opts.env,
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      let timedOut = false;
      let aborted = false;
      const killGroup = () => {
        if (child.pid === undefined) return;
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      };
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup();
      }, opts.timeoutMs);
      const onAbort = () => {
        aborted = true;
        killGroup();
      };
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      if (opts.signal?.aborted) onAbort();
      for (const stream of [child.stdout, child.stderr])
        if (stream)
          createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (l) =>
            opts.onLine?.(l),
          );
      let error: Error | undefined;
      child.once('error', (err) => {
        error = err;
        if (child.pid === undefined) finish(null, null);
      });
      child.once('close', (code, sig) => finish(code, sig));
      let done = false;
      function finish(code: number | null, sig: NodeJS.Signals | null) {
        if (done) return;
        done = true;
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        // Helpers the command left behind go with it.
        killGroup();
        resolve({ code, signal: sig, timedOut, aborted, ...(error ? { error } : {}) });
      }
    });
  },
};
