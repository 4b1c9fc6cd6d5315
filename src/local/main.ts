/** `apphost dev` entrypoint: flags, real dependencies, signals. */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { createLogger } from '../shared/log.ts';
import { onShutdownSignal } from '../shared/shutdown.ts';
import type { StartPlatform } from './dev.ts';
import { startDev } from './dev.ts';
import { DEV_USAGE, DevUsageError, parseDevOptions } from './options.ts';
import { startOrphanGuard } from './orphan-guard.ts';
import { nodeSpawner, trackingSpawner } from './spawner.ts';

/** Bound on a graceful stop of everything (apps drain within their own grace periods inside it). */
export const DEV_SHUTDOWN_BOUND_MS = 60_000;

export async function runDev(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  let opts: ReturnType<typeof parseDevOptions>;
  try {
    opts = parseDevOptions(argv, env, process.cwd());
  } catch (err) {
    if (err instanceof DevUsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS_')) {
      process.stderr.write(`apphost dev: ${(err as Error).message}\n\n${DEV_USAGE}\n`);
      return 2;
    }
    throw err;
  }
  if (opts.help) {
    process.stdout.write(`${DEV_USAGE}\n`);
    return 0;
  }
  const log = createLogger({ name: 'apphost-dev', level: opts.logLevel });
  mkdirSync(opts.stateDir, { recursive: true, mode: 0o700 });
  const guard = startOrphanGuard(join(opts.stateDir, `children-${process.pid}`));
  const spawner = trackingSpawner(nodeSpawner, (pids) => guard.update(pids));
  // Last resort: whatever path ends this process, no app or nats-server outlives it (SIGKILL: the guard).
  process.on('exit', () => {
    spawner.killAll();
    guard.disarm();
  });
  const startPlatform: StartPlatform = async (deps) =>
    (await import('./platform.ts')).startLocalPlatform(deps);
  let session: Awaited<ReturnType<typeof startDev>>;
  try {
    session = await startDev({
      opts,
      env,
      log,
      registry: new Registry(),
      spawner,
      output: (line) => process.stdout.write(`${line}\n`),
      print: (text) => process.stdout.write(`${text}\n`),
      startPlatform,
    });
  } catch (err) {
    process.stderr.write(`apphost dev: ${(err as Error).message}\n`);
    return 1;
  }
  onShutdownSignal(log, DEV_SHUTDOWN_BOUND_MS, [{ name: 'local platform', run: session.stop }]);
  return 0;
}
