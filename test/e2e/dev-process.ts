/** Starts `apphost dev` (node src/cli/main.ts dev) as a child process for e2e tests. */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { buildDataPlane } from '../integration/gateway/dataplane-binary.ts';

export const REPO = resolve(import.meta.dirname, '..', '..');
/** Generous: the first start imports three Python runtimes and NATS on a busy 2-core machine. */
export const DEV_START_TIMEOUT_MS = 120_000;
export const DEV_STOP_TIMEOUT_MS = 90_000;

/**
 * Which data plane `apphost dev` serves the run API with in these suites: APPHOST_TEST_DATA_PLANE, as the
 * gateway suites (`make test-unit` runs local-mode and local-scaling again with `native`).
 */
export const TEST_DATA_PLANE = process.env.APPHOST_TEST_DATA_PLANE ?? 'node';

/** The env that makes `apphost dev` run the native data plane (built from this tree), or none in node mode. */
export function dataPlaneEnv(): NodeJS.ProcessEnv {
  if (TEST_DATA_PLANE === 'node') return {};
  if (TEST_DATA_PLANE !== 'native')
    throw new Error(`APPHOST_TEST_DATA_PLANE must be node or native, not ${TEST_DATA_PLANE}`);
  return { APPHOST_GATEWAY_DATA_PLANE: 'native', APPHOST_GATEWAY_DATA_PLANE_BIN: buildDataPlane() };
}

export interface Credentials {
  project_id: string;
  api_url: string;
  base_url: string;
  run_token: string;
  service_account_token: string;
}

export interface DevProcess {
  child: ChildProcess;
  creds: Credentials;
  output(): string;
  /** SIGTERM, then the exit code (or 'timeout'). */
  stop(): Promise<number | null | 'timeout'>;
  /** SIGKILL of it and everything below it (test cleanup). */
  kill(): void;
}

export async function until<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

/** Every process whose parent chain leads to `root` (from /proc, so a detached child is found too). */
export function descendants(root: number): number[] {
  const parent = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
      parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // exited while we looked
    }
  }
  const out: number[] = [];
  for (const pid of parent.keys()) {
    let p = parent.get(pid);
    for (let depth = 0; p !== undefined && p > 1 && depth < 64; depth++) {
      if (p === root) {
        out.push(pid);
        break;
      }
      p = parent.get(p);
    }
  }
  return out;
}

/** Alive and not a zombie. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

export async function startDevProcess(opts: {
  appsDir: string;
  stateDir: string;
  credentialsFile: string;
  env?: NodeJS.ProcessEnv;
}): Promise<DevProcess> {
  // The CLI profile `apphost dev` writes goes next to its state, never into the user's ~/.config.
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    APPHOST_CONFIG: join(opts.stateDir, 'cli-config.json'),
    ...dataPlaneEnv(),
    ...opts.env,
  };
  if (!opts.env?.NATS_URL) delete env.NATS_URL;
  const child = spawn(
    process.execPath,
    [
      join(REPO, 'src', 'cli', 'main.ts'),
      'dev',
      '--apps',
      opts.appsDir,
      '--port',
      '0',
      '--management-port',
      '0',
      '--ops-port',
      '0',
      '--state-dir',
      opts.stateDir,
      '--credentials-out',
      opts.credentialsFile,
    ],
    { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const seen = new Set<number>();
  const kill = () => {
    // Children seen while it ran: they are no longer its descendants once it is gone.
    for (const pid of [...seen, ...(child.pid !== undefined ? descendants(child.pid) : [])]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    if (child.exitCode === null) child.kill('SIGKILL');
  };
  try {
    const creds = await until(
      'the credentials file',
      () => {
        if (child.exitCode !== null) throw new Error(`apphost dev exited early:\n${output}`);
        return existsSync(opts.credentialsFile)
          ? (JSON.parse(readFileSync(opts.credentialsFile, 'utf8')) as Credentials)
          : undefined;
      },
      DEV_START_TIMEOUT_MS,
    );
    // The banner is printed before the file is written, but our pipe may not have read it yet.
    await until(
      'the banner on stdout',
      () => (output.includes('Ctrl-C stops everything.') ? true : undefined),
      DEV_START_TIMEOUT_MS,
    );
    if (child.pid !== undefined) for (const pid of descendants(child.pid)) seen.add(pid);
    return {
      child,
      creds,
      output: () => output,
      kill,
      stop: async () => {
        child.kill('SIGTERM');
        return Promise.race([
          exit,
          new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), DEV_STOP_TIMEOUT_MS)),
        ]);
      },
    };
  } catch (err) {
    kill();
    throw err;
  }
}
