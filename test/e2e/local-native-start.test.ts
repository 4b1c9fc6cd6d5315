/**
 * `apphost dev` with APPHOST_GATEWAY_DATA_PLANE=native that cannot start its data plane: it says which
 * setting is wrong and exits, leaving nothing running (an empty apps folder, so only NATS is started).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { alive, descendants, REPO, until } from './dev-process.ts';

/** Bound on `apphost dev` giving up here (it starts NATS only). */
const EXIT_WITHIN_MS = 60_000;

describe('apphost dev with a native data plane that cannot start (e2e)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'apphost-e2e-native-start-'));
  mkdirSync(join(dir, 'apps'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const dev = (env: NodeJS.ProcessEnv) =>
    new Promise<{ code: number | null; output: string; children: number[] }>((resolve, reject) => {
      const child = spawn(
        process.execPath,
        [
          join(REPO, 'src', 'cli', 'main.ts'),
          'dev',
          ...['--apps', join(dir, 'apps'), '--state-dir', join(dir, 'state')],
          ...['--port', '0', '--management-port', '0', '--ops-port', '0'],
        ],
        { cwd: REPO, env: { ...process.env, NATS_URL: '', APPHOST_CONFIG: join(dir, 'cfg.json'), ...env } },
      );
      let output = '';
      const children = new Set<number>();
      const seen = setInterval(() => {
        if (child.pid !== undefined) for (const p of descendants(child.pid)) children.add(p);
      }, 50);
      child.stdout.on('data', (c: Buffer) => (output += c.toString()));
      child.stderr.on('data', (c: Buffer) => (output += c.toString()));
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`apphost dev did not exit within ${EXIT_WITHIN_MS} ms:\n${output}`));
      }, EXIT_WITHIN_MS);
      child.once('exit', (code) => {
        clearTimeout(timer);
        clearInterval(seen);
        resolve({ code, output, children: [...children] });
      });
    });

  it('refuses native without APPHOST_GATEWAY_DATA_PLANE_BIN before starting anything', async () => {
    const r = await dev({ APPHOST_GATEWAY_DATA_PLANE: 'native', APPHOST_GATEWAY_DATA_PLANE_BIN: '' });
    expect(r.code).toBe(2);
    expect(r.output).toContain('APPHOST_GATEWAY_DATA_PLANE=native needs APPHOST_GATEWAY_DATA_PLANE_BIN');
  });

  it('fails the start naming the binary when the data plane exits at once, and stops what it started', async () => {
    const r = await dev({
      APPHOST_GATEWAY_DATA_PLANE: 'native',
      APPHOST_GATEWAY_DATA_PLANE_BIN: '/bin/false',
    });
    expect(r.code).toBe(1);
    expect(r.output).toMatch(
      /apphost dev: the native data plane \(APPHOST_GATEWAY_DATA_PLANE_BIN=\/bin\/false\) exited at start/,
    );
    expect(r.children.length).toBeGreaterThan(0); // nats-server at least
    // nats-server is stopped on the way out, the orphan guard ends within a second of it.
    await until('every child process to be gone', () => r.children.every((p) => !alive(p)), 10_000);
  });
});
