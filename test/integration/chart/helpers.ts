import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { binaryPath } from '../../harness/binaries.ts';

export const REPO = resolve(import.meta.dirname, '..', '..', '..');
export const CHART = join(REPO, 'charts', 'apphost');

const exec = promisify(execFile);
/** Helm keeps caches and config in these; a private set keeps tests off the user's. */
const helmHome = mkdtempSync(join(tmpdir(), 'apphost-helm-'));
export const helmEnv: NodeJS.ProcessEnv = {
  ...process.env,
  HELM_CACHE_HOME: join(helmHome, 'cache'),
  HELM_CONFIG_HOME: join(helmHome, 'config'),
  HELM_DATA_HOME: join(helmHome, 'data'),
};

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a tool; never throws on a non-zero exit, so tests can assert on the output. */
export async function run(
  tool: 'helm' | 'kubectl' | string,
  args: string[],
  opts: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<Run> {
  const file = tool === 'helm' || tool === 'kubectl' ? binaryPath(tool) : tool;
  const child = exec(file, args, {
    env: opts.env ?? helmEnv,
    maxBuffer: 64 * 1024 * 1024,
    timeout: opts.timeoutMs ?? 120_000,
    cwd: REPO,
  });
  if (opts.input !== undefined) child.child.stdin?.end(opts.input);
  try {
    const { stdout, stderr } = await child;
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string; message: string };
    return {
      code: typeof e.code === 'number' ? e.code : 1,
      stdout: e.stdout ?? '',
      stderr: e.stderr ?? e.message,
    };
  }
}
