import type { Logger } from './log.ts';

/**
 * Runs `steps` in order on SIGTERM/SIGINT (or `signals.stop`; `signals.ignore` are ignored), within
 * `boundMs` in total; a second signal or the bound passing exits at once. Only main.ts files call this.
 */
export function onShutdownSignal(
  log: Logger,
  boundMs: number,
  steps: Array<{ name: string; run: () => Promise<void> }>,
  signals: { stop: NodeJS.Signals[]; ignore?: NodeJS.Signals[] } = { stop: ['SIGTERM', 'SIGINT'] },
): void {
  let stopping = false;
  const handler = async (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    log.info({ signal, boundMs }, 'shutting down');
    const timer = setTimeout(() => {
      log.error({ boundMs }, 'shutdown bound passed: exiting with work unfinished');
      process.exit(1);
    }, boundMs);
    timer.unref();
    let code = 0;
    for (const step of steps) {
      try {
        await step.run();
      } catch (err) {
        code = 1;
        log.error({ err, step: step.name }, 'shutdown step failed');
      }
    }
    log.info('stopped');
    process.exit(code);
  };
  for (const signal of signals.stop) process.on(signal, handler);
  for (const signal of signals.ignore ?? []) process.on(signal, () => {});
}
