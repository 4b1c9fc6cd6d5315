/**
 * The processes of the chaos test: each is started with fixed ports (a restart comes back where
 * clients expect it), its pid is tracked by the watchdog, and it can be SIGKILLed, SIGSTOPped and
 * continued by its real pid. A piece that exits while starting (a start-up bound passed while NATS was
 * unavailable) is started again, as Kubernetes restarts a container that exits; those restarts are counted.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import type { Watchdog } from '../harness/watchdog.ts';

/** Bound on a (re)started piece saying it is ready. */
export const PIECE_START_TIMEOUT_MS = 90_000;

export type PieceKind = 'nats' | 'gateway' | 'worker' | 'dispatcher';

export interface Fault {
  at: number;
  piece: string;
  kind: PieceKind;
  what: 'kill' | 'stop' | 'cont';
}

export interface Piece {
  readonly name: string;
  readonly kind: PieceKind;
  /** Running, ready (started fully) and not stopped. */
  healthy(): boolean;
  /** Running (perhaps stopped). */
  alive(): boolean;
  stopped(): boolean;
  /** Starts it and resolves once ready (throws after PIECE_START_TIMEOUT_MS). */
  start(): Promise<void>;
  /** Times a start had to spawn the process again because it exited before it was ready. */
  exitsWhileStarting(): number;
  kill(): Promise<void>;
  stop(): void;
  cont(): void;
}

/** A process started with `command args`, ready when `ready()` says so (polled) or `readyLine` is printed. */
export function processPiece(opts: {
  name: string;
  kind: PieceKind;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  logDir: string;
  watchdog: Watchdog;
  readyLine?: RegExp;
  ready?: () => Promise<boolean>;
}): Piece {
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let isStopped = false;
  let isReady = false;
  let restartsWhileStarting = 0;
  const log = createWriteStream(join(opts.logDir, `${opts.name}.log`), { flags: 'a' });
  const running = () => !!child && child.exitCode === null && child.signalCode === null;
  const signal = (sig: NodeJS.Signals) => {
    if (child?.pid && running()) process.kill(child.pid, sig);
  };
  return {
    name: opts.name,
    kind: opts.kind,
    healthy: () => running() && isReady && !isStopped,
    alive: running,
    stopped: () => isStopped,
    async start() {
      const deadline = Date.now() + PIECE_START_TIMEOUT_MS;
      for (;;) {
        const c = spawn(opts.command, opts.args, { env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
        child = c;
        isStopped = false;
        isReady = false;
        opts.watchdog.track(opts.name, c.pid);
        c.stderr?.pipe(log, { end: false });
        let out = '';
        c.stdout?.on('data', (d: Buffer) => {
          log.write(d);
          if (opts.readyLine && out.length < 10_000) out += d.toString();
        });
        exited = new Promise((r) =>
          c.once('exit', () => {
            if (child === c) opts.watchdog.track(opts.name, undefined);
            r();
          }),
        );
        for (;;) {
          if (c.exitCode !== null || c.signalCode !== null) break;
          const ok = opts.readyLine
            ? opts.readyLine.test(out)
            : await (opts.ready as () => Promise<boolean>)().catch(() => false);
          if (ok) {
            isReady = true;
            return;
          }
          if (Date.now() > deadline)
            throw new Error(
              `${opts.name} not ready within ${PIECE_START_TIMEOUT_MS} ms (see ${opts.logDir})`,
            );
          await new Promise((r) => setTimeout(r, 200));
        }
        // Exited while starting: started again (a kubelet's restart), within the same bound.
        restartsWhileStarting++;
        if (Date.now() > deadline)
          throw new Error(`${opts.name} exited while starting (see ${opts.logDir}/${opts.name}.log)`);
        await new Promise((r) => setTimeout(r, 500));
      }
    },
    exitsWhileStarting: () => restartsWhileStarting,
    async kill() {
      signal('SIGKILL');
      await exited;
      isStopped = false;
    },
    stop() {
      signal('SIGSTOP');
      isStopped = true;
    },
    cont() {
      signal('SIGCONT');
      isStopped = false;
    },
  };
}
