/** Even a SIGKILLed `apphost dev` (no handler runs) leaves no app runtime or nats-server behind. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { alive, type DevProcess, descendants, REPO, startDevProcess, until } from './dev-process.ts';

describe('apphost dev killed with SIGKILL (e2e)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'apphost-e2e-kill-'));
  let dev: DevProcess | undefined;
  afterAll(() => {
    dev?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it('has its guard stop every child process group', async () => {
    dev = await startDevProcess({
      appsDir: join(REPO, 'examples', 'apps'),
      stateDir: join(dir, 'state'),
      credentialsFile: join(dir, 'credentials.json'),
    });
    const pids = descendants(dev.child.pid!);
    // nats-server, three runtimes and the guard
    expect(pids.length).toBeGreaterThanOrEqual(5);
    dev.child.kill('SIGKILL');
    await until(
      'every child process to be gone',
      () => (pids.every((p) => !alive(p)) ? true : undefined),
      30_000,
    );
  });
});
