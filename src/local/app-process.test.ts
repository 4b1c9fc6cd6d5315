import { describe, expect, it } from 'vitest';
import type { LocalApp } from './app-manifests.ts';
import { appProcessSpec, readinessPath } from './app-process.ts';

const app = (spec: LocalApp['manifest']['spec'], grace = 900): LocalApp => ({
  name: 'a',
  dir: '/apps/a',
  file: '/apps/a/apphost.toml',
  config: { app: { name: 'a' } },
  gracePeriodSeconds: grace,
  manifest: { apiVersion: 'apphost.dev/v1alpha1', kind: 'App', metadata: { name: 'a' }, spec },
});

describe('appProcessSpec', () => {
  it('runs a cortex app with the Python runtime on loopback, its grace period and env', () => {
    const spec = appProcessSpec(
      app(
        {
          runtime: 'cortex',
          env: [
            { name: 'GREETING', value: 'hi' },
            { name: 'FROM_SECRET', valueFrom: { secretKeyRef: { name: 'creds', key: 'token' } } },
          ],
        },
        60,
      ),
      4321,
      '/venv/bin/python',
      { PATH: '/bin' },
    );
    expect(spec.command).toBe('/venv/bin/python');
    expect(spec.args).toEqual([
      '-m',
      'apphost_runtime',
      '--app-dir',
      '/apps/a',
      '--host',
      '127.0.0.1',
      '--port',
      '4321',
      '--grace-seconds',
      '60',
    ]);
    expect(spec.cwd).toBe('/apps/a');
    expect(spec.env).toMatchObject({ PATH: '/bin', GREETING: 'hi', PYTHONUNBUFFERED: '1' });
    expect(spec.env.FROM_SECRET).toBeUndefined();
    expect(readinessPath(app({ runtime: 'cortex' }))).toBe('/ready');
  });

  it('runs a custom app with its entrypoint and PORT', () => {
    const a = app({ runtime: 'custom', entrypoint: ['./server', '--fast'], readinessPath: '/healthz' });
    const spec = appProcessSpec(a, 5555, 'python3', {});
    expect([spec.command, ...spec.args]).toEqual(['./server', '--fast']);
    expect(spec.env.PORT).toBe('5555');
    expect(readinessPath(a)).toBe('/healthz');
  });
});
