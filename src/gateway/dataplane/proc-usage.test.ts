import { describe, expect, it } from 'vitest';
import { CLOCK_TICKS_PER_SECOND, cpuSecondsOfStat, procUsage, residentBytesOfStatus } from './proc-usage.ts';

describe("a process's CPU and memory from /proc", () => {
  it('reads utime + stime after the command, whatever the command holds', () => {
    const rest = 'S 1 2 3 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0 500 1000 200';
    expect(cpuSecondsOfStat(`42 (apphost-dataplane) ${rest}`)).toBe(3.25);
    expect(cpuSecondsOfStat(`42 (a b) c) (d) ${rest}`)).toBe(3.25);
    expect(cpuSecondsOfStat('not a stat line')).toBeUndefined();
    expect(cpuSecondsOfStat('42 (x) S 1')).toBeUndefined();
  });

  it('reads VmRSS in bytes; none (a zombie) is undefined', () => {
    expect(residentBytesOfStatus('Name:\tx\nVmPeak:\t  9 kB\nVmRSS:\t    5120 kB\nThreads:\t1\n')).toBe(
      5120 * 1024,
    );
    expect(residentBytesOfStatus('Name:\tx\nState:\tZ (zombie)\n')).toBeUndefined();
  });

  it.skipIf(process.platform !== 'linux')(
    'reads a live process as the kernel counts it (this one)',
    async () => {
      const usage = procUsage();
      const before = process.cpuUsage();
      const cpu = (await usage.cpuSeconds(process.pid)) as number;
      const after = process.cpuUsage();
      // The kernel's ticks and Node's microseconds agree within a tick either side.
      const tick = 1 / CLOCK_TICKS_PER_SECOND;
      expect(cpu).toBeGreaterThanOrEqual((before.user + before.system) / 1e6 - 2 * tick);
      expect(cpu).toBeLessThanOrEqual((after.user + after.system) / 1e6 + 2 * tick);
      const rss = (await usage.residentBytes(process.pid)) as number;
      expect(rss / process.memoryUsage().rss).toBeGreaterThan(0.8);
      expect(rss / process.memoryUsage().rss).toBeLessThan(1.25);
      // A process that is not there.
      expect(await usage.cpuSeconds(2 ** 22 + 1)).toBeUndefined();
      expect(await usage.residentBytes(2 ** 22 + 1)).toBeUndefined();
    },
  );
});
