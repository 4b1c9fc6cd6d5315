import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { runCli, usage } from './commands.ts';

const capture = () => {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (l: string) => out.push(l), err: (l: string) => err.push(l) }, out, err };
};

describe('runCli', () => {
  it('prints the version', async () => {
    const c = capture();
    expect(await runCli(['version'], {}, c.io)).toBe(0);
    expect(c.out[0]).toMatch(/^apphost \d+\.\d+\.\d+/);
  });

  it('lists every command in help', async () => {
    const c = capture();
    expect(await runCli(['help'], {}, c.io)).toBe(0);
    for (const name of ['dev', 'gateway', 'webhooks', 'management', 'operator', 'create-service-account'])
      expect(usage()).toContain(`  ${name} `);
    expect(c.out.join('\n')).toBe(usage());
  });

  it('exits 2 on an unknown command and on no command', async () => {
    const c = capture();
    expect(await runCli(['frobnicate'], {}, c.io)).toBe(2);
    expect(c.err.join('\n')).toMatch(/unknown command 'frobnicate'/);
    expect(await runCli([], {}, capture().io)).toBe(2);
  });

  it('exits 2 with a clear message on a bad flag of dev', async () => {
    const r = spawnSync(process.execPath, ['src/cli/main.ts', 'dev', '--no-such-flag'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/apphost dev: Unknown option '--no-such-flag'/);
    expect(r.stderr).toMatch(/usage: apphost dev/);
  });

  it('rejects arguments to a service command (they are configured by env)', async () => {
    const c = capture();
    expect(await runCli(['webhooks', '--x'], {}, c.io)).toBe(2);
    expect(c.err.join('\n')).toMatch(/apphost webhooks: unexpected arguments: --x/);
  });

  it('prints the flags of dev with --help and exits 0', () => {
    const r = spawnSync(process.execPath, ['src/cli/main.ts', 'dev', '--help'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/--credentials-out FILE/);
  });

  it('passes flags through to create-service-account and its usage errors exit 2', () => {
    const r = spawnSync(process.execPath, ['src/cli/main.ts', 'create-service-account', '--project', 'x'], {
      encoding: 'utf8',
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/apphost create-service-account: --name/);
  });
});
