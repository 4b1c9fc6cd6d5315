/**
 * If apphost dev itself is SIGKILLed (no handler runs), its detached children would live on. A tiny
 * detached shell watches our pid and, once it is gone, stops the process groups listed in a file we
 * keep current. On a normal exit the file is removed first, so the guard just leaves.
 */
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';

const GUARD_SCRIPT = `p=$1; f=$2
while kill -0 "$p" 2>/dev/null; do sleep 1; done
[ -f "$f" ] || exit 0
for g in $(cat "$f"); do kill -TERM -- "-$g" 2>/dev/null; done
sleep 3
for g in $(cat "$f"); do kill -KILL -- "-$g" 2>/dev/null; done
rm -f "$f"`;

export interface OrphanGuard {
  /** Records the process groups to stop should we die (each child leads its own group). */
  update(pgids: number[]): void;
  /** Normal exit: nothing is left to stop. */
  disarm(): void;
}

export function startOrphanGuard(file: string, parentPid: number = process.pid): OrphanGuard {
  writeFileSync(file, '', { mode: 0o600 });
  const guard = spawn('bash', ['-c', GUARD_SCRIPT, 'apphost-dev-guard', String(parentPid), file], {
    detached: true,
    stdio: 'ignore',
  });
  guard.unref();
  guard.on('error', () => {});
  return {
    update(pgids) {
      try {
        writeFileSync(file, pgids.join('\n'), { mode: 0o600 });
      } catch {
        // best effort: the state dir may be gone during shutdown
      }
    },
    disarm() {
      rmSync(file, { force: true });
    },
  };
}
