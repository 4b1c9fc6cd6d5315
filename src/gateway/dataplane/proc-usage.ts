/**
 * A running process's CPU time and resident memory, read from Linux's /proc (`/proc/<pid>/stat` and
 * `/proc/<pid>/status`): what the gateway reports of its native data plane child
 * (`apphost_gateway_dataplane_{cpu_seconds_total,resident_memory_bytes}`, design §5), kept apart from
 * Node's own `process_*` series so that each process's cost stays visible.
 */
import { readFile } from 'node:fs/promises';

/** What the supervisor reads of its child at a scrape; undefined: no such process (gone, or not Linux). */
export interface ProcessUsage {
  /** User + system CPU time, in seconds. */
  cpuSeconds(pid: number): Promise<number | undefined>;
  /** Resident set size, in bytes. */
  residentBytes(pid: number): Promise<number | undefined>;
}

/**
 * Clock ticks per second of /proc/<pid>/stat's times: USER_HZ, 100 on every Linux architecture the
 * image is built for (the kernel scales its internal HZ to it for userspace).
 */
export const CLOCK_TICKS_PER_SECOND = 100;

/** Seconds of CPU (utime + stime) in a /proc/<pid>/stat line; undefined if it is not one. */
export function cpuSecondsOfStat(stat: string): number | undefined {
  // The command (field 2) is in parentheses and may hold spaces and ')': the fields after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state): utime and stime are fields 14 and 15.
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  if (stat.lastIndexOf(')') < 0 || !Number.isInteger(utime) || !Number.isInteger(stime)) return undefined;
  return (utime + stime) / CLOCK_TICKS_PER_SECOND;
}

/** Bytes of `VmRSS` in /proc/<pid>/status (written in kB: KiB); undefined without one (a zombie). */
export function residentBytesOfStatus(status: string): number | undefined {
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
  return kib === undefined ? undefined : Number(kib) * 1024;
}

/** The real reader, of `root` (/proc). */
export function procUsage(root = '/proc'): ProcessUsage {
  const read = async (pid: number, file: string) => {
    try {
      return await readFile(`${root}/${pid}/${file}`, 'utf8');
    } catch {
      return undefined;
    }
  };
  return {
    cpuSeconds: async (pid) => {
      const stat = await read(pid, 'stat');
      return stat === undefined ? undefined : cpuSecondsOfStat(stat);
    },
    residentBytes: async (pid) => {
      const status = await read(pid, 'status');
      return status === undefined ? undefined : residentBytesOfStatus(status);
    },
  };
}
