/** Running a process on the node: in the namespaces keeper.sh holds, entered with nsenter. */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface NodeProcess {
  readonly name: string;
  readonly child: ChildProcess;
  /** Resolves with the exit code once the process has ended. */
  readonly exited: Promise<number | null>;
  /** Signals the process itself (nsenter does not pass signals on to the command it runs). */
  kill(signal?: NodeJS.Signals): void;
}

/** Starts `cmd` on the node; its output goes to <root>/logs/<name>.log. The namespace's teardown ends it. */
export function startOnNode(
  holderPid: number,
  root: string,
  name: string,
  cmd: string,
  args: string[],
): NodeProcess {
  const fd = openSync(join(root, 'logs', `${name}.log`), 'a');
  const child = spawn('nsenter', ['-t', String(holderPid), '-n', '-m', '-p', '--', cmd, ...args], {
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    name,
    child,
    exited,
    kill(signal = 'SIGTERM') {
      const pid = child.pid;
      if (pid === undefined) return;
      let children: string[] = [];
      try {
        children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
          .trim()
          .split(/\s+/)
          .filter(Boolean);
      } catch {
        return;
      }
      for (const c of children) {
        try {
          process.kill(Number(c), signal);
        } catch {
          // already gone
        }
      }
    },
  };
}

/** Runs `cmd` on the node to completion; throws with the log's path on a non-zero exit. */
export async function runOnNode(holderPid: number, root: string, name: string, cmd: string, args: string[]) {
  const code = await startOnNode(holderPid, root, name, cmd, args).exited;
  if (code !== 0) throw new Error(`${name} failed (exit ${code}); see ${join(root, 'logs', `${name}.log`)}`);
}
