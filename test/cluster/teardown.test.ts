/**
 * The cluster harness leaves nothing behind even when the test runner is killed outright: a second
 * cluster is started by a child process, which is then SIGKILLed; its keeper must remove every process,
 * mount, interface, iptables rule, cgroup and file of it, and the host's network must be as it was.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../harness/process.ts';
import { CLUSTER_START_TIMEOUT_MS, CLUSTER_STOP_TIMEOUT_MS } from './node.ts';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Host PIDs whose command line or mounts mention `root`. */
function processesOf(root: string): number[] {
  const pids: number[] = [];
  for (const p of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8');
      if (cmd.includes(root)) pids.push(Number(p));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

const cgroupsOf = (cgroupRoot: string) =>
  readdirSync('/sys/fs/cgroup').filter((c) => existsSync(join('/sys/fs/cgroup', c, cgroupRoot)));

const hostNetwork = () => ({
  links: execFileSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' })
    .split('\n')
    .map((l) => l.split(':')[1]?.trim())
    .filter(Boolean)
    .sort(),
  kubeChains: execFileSync('iptables-save', { encoding: 'utf8' })
    .split('\n')
    .filter((l) => /KUBE-|CNI-/.test(l)),
});

describe('cluster teardown', () => {
  it('removes everything of a cluster whose runner was SIGKILLed', {
    timeout: CLUSTER_START_TIMEOUT_MS * 3,
  }, async () => {
    const before = hostNetwork();
    const { APPHOST_TEST_KEEP_DIRS: _keep, ...env } = process.env;
    const child = spawn(process.execPath, [join(import.meta.dirname, 'fixtures', 'cluster-then-wait.ts')], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env,
    });
    const line = await new Promise<string>((resolve, reject) => {
      let buf = '';
      child.stdout.on('data', (d) => {
        buf += d;
        if (buf.includes('\n')) resolve(buf.split('\n')[0] as string);
      });
      child.once('exit', (code) => reject(new Error(`second cluster did not start (exit ${code})`)));
    });
    const c = JSON.parse(line) as { root: string; cgroupRoot: string; keeperPid: number; holderPid: number };

    // Running: processes in its namespace, pod cgroups, its state folder.
    expect(processesOf(c.root).length).toBeGreaterThan(5);
    expect(cgroupsOf(c.cgroupRoot)).toContain('memory');
    expect(existsSync(join(c.root, 'logs', 'kubelet.log'))).toBe(true);

    child.kill('SIGKILL');
    await waitFor('keeper.sh to finish', async () => !alive(c.keeperPid), CLUSTER_STOP_TIMEOUT_MS, 200);

    expect(alive(c.holderPid)).toBe(false);
    expect(processesOf(c.root)).toEqual([]);
    expect(cgroupsOf(c.cgroupRoot)).toEqual([]);
    expect(existsSync(c.root)).toBe(false);
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(c.root);
    expect(hostNetwork()).toEqual(before);
  });
});
