/**
 * The load generator, always its own process so it never shares an event loop with what it measures:
 * Debian's `wrk` when installed (C, cheapest on a small machine), else `autocannon` from node_modules.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface LoadSpec {
  url: string;
  method: 'POST' | 'GET';
  headers: Record<string, string>;
  body?: string;
  connections: number;
  durationSeconds: number;
  /**
   * Each connection waits this long after an answer before its next request (wrk's `delay()`): the
   * request rate then hardly depends on the server's speed, so CPU per call compares the work of two
   * servers at the same rate (closed-loop load at full speed lets a faster server batch more calls per
   * event-loop turn, which moves its CPU per call more than small changes of its work do).
   */
  delayMs?: number;
}

export interface LoadResult {
  requests: number;
  durationSeconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Responses outside 2xx/3xx. */
  non2xx: number;
  /** Connect/read/write errors and timeouts. */
  errors: number;
}

export interface LoadGenerator {
  readonly name: string;
  run(spec: LoadSpec): Promise<LoadResult>;
}

/** Extra time the load generator gets beyond its run before it is killed. */
export const LOAD_PROCESS_GRACE_MS = 60_000;

function run(cmd: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} failed: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

const luaString = (s: string) => `[==[${s}]==]`;

export function wrkScript(spec: LoadSpec): string {
  const lines = [`wrk.method = "${spec.method}"`];
  if (spec.body !== undefined) lines.push(`wrk.body = ${luaString(spec.body)}`);
  for (const [k, v] of Object.entries(spec.headers))
    lines.push(`wrk.headers[ ${luaString(k)} ] = ${luaString(v)}`);
  if (spec.delayMs) lines.push(`delay = function() return ${spec.delayMs} end`);
  lines.push(
    'done = function(summary, latency, requests)',
    '  local e = summary.errors',
    '  io.write(string.format("BENCHJSON {\\"requests\\":%d,\\"durationUs\\":%d,\\"non2xx\\":%d,\\"errors\\":%d,\\"p50Us\\":%d,\\"p99Us\\":%d}\\n",',
    '    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,',
    '    latency:percentile(50), latency:percentile(99)))',
    'end',
  );
  return `${lines.join('\n')}\n`;
}

export function wrkGenerator(wrkPath: string): LoadGenerator {
  const dir = mkdtempSync(join(tmpdir(), 'apphost-bench-wrk-'));
  let n = 0;
  return {
    name: `wrk (${wrkPath}), 1 thread`,
    async run(spec) {
      const script = join(dir, `s${n++}.lua`);
      writeFileSync(script, wrkScript(spec));
      const out = await run(
        wrkPath,
        [
          '-t1',
          `-c${spec.connections}`,
          `-d${spec.durationSeconds}s`,
          '--timeout',
          '30s',
          '-s',
          script,
          spec.url,
        ],
        spec.durationSeconds * 1000 + LOAD_PROCESS_GRACE_MS,
      );
      const line = out.split('\n').find((l) => l.startsWith('BENCHJSON '));
      if (!line) throw new Error(`wrk printed no summary:\n${out}`);
      const j = JSON.parse(line.slice('BENCHJSON '.length)) as {
        requests: number;
        durationUs: number;
        non2xx: number;
        errors: number;
        p50Us: number;
        p99Us: number;
      };
      const durationSeconds = j.durationUs / 1e6;
      return {
        requests: j.requests,
        durationSeconds,
        rps: j.requests / durationSeconds,
        p50Ms: j.p50Us / 1000,
        p99Ms: j.p99Us / 1000,
        non2xx: j.non2xx,
        errors: j.errors,
      };
    },
  };
}

interface AutocannonJson {
  requests: { total: number; average: number };
  latency: { p50: number; p99: number };
  duration: number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

export function autocannonGenerator(binPath: string): LoadGenerator {
  return {
    name: `autocannon (${binPath})`,
    async run(spec) {
      const args = [
        '-c',
        String(spec.connections),
        '-d',
        String(spec.durationSeconds),
        '-m',
        spec.method,
        '--json',
      ];
      // autocannon has no per-connection pause: the same rate over all connections instead.
      if (spec.delayMs) args.push('-R', String(Math.round((spec.connections * 1000) / spec.delayMs)));
      for (const [k, v] of Object.entries(spec.headers)) args.push('-H', `${k}=${v}`);
      if (spec.body !== undefined) args.push('-b', spec.body);
      args.push(spec.url);
      const out = await run(
        process.execPath,
        [binPath, ...args],
        spec.durationSeconds * 1000 + LOAD_PROCESS_GRACE_MS,
      );
      const j = JSON.parse(out.trim().split('\n').pop() ?? '{}') as AutocannonJson;
      return {
        requests: j.requests.total,
        durationSeconds: j.duration,
        rps: j.requests.total / j.duration,
        p50Ms: j.latency.p50,
        p99Ms: j.latency.p99,
        non2xx: j.non2xx,
        errors: j.errors + j.timeouts,
      };
    },
  };
}

/** `BENCH_LOAD_TOOL=wrk|autocannon` forces one; otherwise wrk if installed, else autocannon. */
export function pickLoadGenerator(repoRoot: string, forced: string | undefined): LoadGenerator {
  const wrk = ['/usr/bin/wrk', '/usr/local/bin/wrk'].find((p) => existsSync(p));
  const autocannon = join(repoRoot, 'node_modules', 'autocannon', 'autocannon.js');
  if (forced === 'autocannon' || (!wrk && forced !== 'wrk')) return autocannonGenerator(autocannon);
  if (!wrk) throw new Error('BENCH_LOAD_TOOL=wrk but wrk is not installed (apt-get install -y wrk)');
  return wrkGenerator(wrk);
}
