/** How a local app is run: the Python runtime for cortex apps, the app's own entrypoint for custom ones. */
import { effectiveScaling } from '../apis/v1alpha1/scaling.ts';
import type { LocalApp } from './app-manifests.ts';
import type { ProcessSpec } from './spawner.ts';

export const CORTEX_READINESS_PATH = '/ready';

export function appProcessSpec(
  app: LocalApp,
  port: number,
  python: string,
  env: NodeJS.ProcessEnv,
  /** A file the runtime writes why it could not start into (an import error), as a pod's termination log. */
  terminationLog?: string,
): ProcessSpec {
  const appEnv: NodeJS.ProcessEnv = {
    ...env,
    PYTHONUNBUFFERED: '1',
    PYTHONDONTWRITEBYTECODE: '1',
    // As in a pod: the runtime refuses (429) one call more than the App's replicaConcurrency.
    APPHOST_MAX_CONCURRENCY: String(effectiveScaling(app.manifest.spec.scaling).replicaConcurrency),
  };
  for (const v of app.manifest.spec.env ?? []) if (v.value !== undefined) appEnv[v.name] = v.value;
  if (app.manifest.spec.runtime === 'custom') {
    const [command, ...args] = app.manifest.spec.entrypoint ?? [];
    // A custom server finds the app's dependencies on PYTHONPATH (the runtime gets --deps-dir).
    if (app.depsDir)
      appEnv.PYTHONPATH = appEnv.PYTHONPATH ? `${app.depsDir}:${appEnv.PYTHONPATH}` : app.depsDir;
    return { command: command ?? 'false', args, cwd: app.dir, env: { ...appEnv, PORT: String(port) } };
  }
  return {
    command: python,
    args: [
      '-m',
      'apphost_runtime',
      '--app-dir',
      app.dir,
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--grace-seconds',
      String(app.gracePeriodSeconds),
      ...(app.depsDir ? ['--deps-dir', app.depsDir] : []),
      ...(terminationLog ? ['--termination-log', terminationLog] : []),
    ],
    cwd: app.dir,
    env: appEnv,
  };
}

export function readinessPath(app: LocalApp): string {
  return app.manifest.spec.runtime === 'custom'
    ? (app.manifest.spec.readinessPath ?? app.manifest.spec.healthcheckPath ?? '/')
    : CORTEX_READINESS_PATH;
}
