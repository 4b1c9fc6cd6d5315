/**
 * The native reverse proxies of bench/native/ (Go net/http, Go fasthttp, Rust hyper), each the same
 * design as bare-proxy.ts, for `bench/floor.ts` (docs/benchmarks.md, "A native data plane: what it
 * would buy (issue 16, tenth round)"). Built on first use into $APPHOST_CACHE/native/<source hash>/
 * (`go build` from the pinned go.mod/go.sum, `cargo build --locked` from Cargo.lock); `make test` never
 * builds or needs them. A build needs `go` or `cargo` on PATH and, the first time, their module proxy
 * or crates.io; each build is bounded by NATIVE_BUILD_TIMEOUT_MS.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { join, relative } from 'node:path';
import { BENCH_DIR } from './parts.ts';

/** Bound on one `go build` or `cargo build` (the first cargo build fetches and compiles ~30 crates: ~40 s here). */
export const NATIVE_BUILD_TIMEOUT_MS = 900_000;

const NATIVE_DIR = join(BENCH_DIR, 'native');

type Toolchain = 'go' | 'rust';

/** A variant: which binary, and the environment it runs with. */
export interface NativeProxy {
  readonly toolchain: Toolchain;
  /** The Go package (./stdproxy) or the cargo binary (hyperproxy). */
  readonly target: string;
  readonly env: Readonly<Record<string, string>>;
  readonly about: string;
  /**
   * Serves the gateway's path (`/v4/<project>/<app>/<function>`, a run token) and does the gateway's own
   * per-call work (bench/native/rust/src/work.rs): NATIVE_WORK_* come from the caller.
   */
  readonly gatewayShaped?: boolean;
}

export const NATIVE_PROXIES: Readonly<Record<string, NativeProxy>> = {
  'go-std': {
    toolchain: 'go',
    target: './stdproxy',
    env: {},
    about: 'Go net/http server + httputil.ReverseProxy (GOMAXPROCS = cores)',
  },
  'go-std-1': {
    toolchain: 'go',
    target: './stdproxy',
    env: { GOMAXPROCS: '1' },
    about: 'go-std with GOMAXPROCS=1',
  },
  'go-fast': {
    toolchain: 'go',
    target: './fastproxy',
    env: {},
    about: 'Go fasthttp server + HostClient (GOMAXPROCS = cores)',
  },
  'go-fast-1': {
    toolchain: 'go',
    target: './fastproxy',
    env: { GOMAXPROCS: '1' },
    about: 'go-fast with GOMAXPROCS=1',
  },
  'hyper-1': {
    toolchain: 'rust',
    target: 'hyperproxy',
    env: { NATIVE_THREADS: '1' },
    about: "Rust hyper 1 server + hyper-util legacy client, tokio's current_thread runtime",
  },
  'hyper-2': {
    toolchain: 'rust',
    target: 'hyperproxy',
    env: { NATIVE_THREADS: '2' },
    about: 'hyper-1 on a 2-worker multi-thread runtime',
  },
  'hyper-1-work': {
    toolchain: 'rust',
    target: 'hyperproxy',
    env: { NATIVE_THREADS: '1', NATIVE_WORK: '1' },
    about: "hyper-1 doing the gateway's own per-call work (src/work.rs), no access log line",
    gatewayShaped: true,
  },
  'hyper-1-worklog': {
    toolchain: 'rust',
    target: 'hyperproxy',
    env: { NATIVE_THREADS: '1', NATIVE_WORK: '1', NATIVE_ACCESS_LOG: '1' },
    about: 'hyper-1-work with the access log line per call (the gateway at `info`)',
    gatewayShaped: true,
  },
  'hyper-2-work': {
    toolchain: 'rust',
    target: 'hyperproxy',
    env: { NATIVE_THREADS: '2', NATIVE_WORK: '1' },
    about: 'hyper-1-work on a 2-worker multi-thread runtime',
    gatewayShaped: true,
  },
};

function cacheDir(): string {
  return process.env.APPHOST_CACHE ?? join(homedir(), '.cache', 'apphost');
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'target') return [];
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

/** A hash of a toolchain's sources (every file under bench/native/<go|rust>), the build's cache key. */
function sourceHash(toolchain: Toolchain): string {
  const root = join(NATIVE_DIR, toolchain);
  const h = createHash('sha256');
  for (const f of files(root).sort()) h.update(relative(root, f)).update('\0').update(readFileSync(f));
  return h.digest('hex').slice(0, 16);
}

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      { cwd, env: { ...process.env, ...env }, timeout: NATIVE_BUILD_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 },
      (err, _stdout, stderr) => {
        if (!err) return resolve();
        const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
        reject(
          new Error(
            missing
              ? `${cmd} is not on PATH: bench/native's ${cmd === 'go' ? 'Go (1.26+)' : 'Rust (cargo)'} proxies need it`
              : `${cmd} ${args.join(' ')} (in ${cwd}) failed: ${err.message}\n${stderr}`,
          ),
        );
      },
    );
  });
}

/**
 * The binary of a native proxy, built first when its sources changed since the last build. A build
 * writes into a temporary name and renames, so a half-built binary is never used.
 */
export async function nativeProxyBinary(p: NativeProxy): Promise<string> {
  const name = p.toolchain === 'go' ? p.target.replace(/^\.\//, '') : p.target;
  const dir = join(cacheDir(), 'native', `${p.toolchain}-${sourceHash(p.toolchain)}`);
  const bin = join(dir, name);
  if (existsSync(bin)) return bin;
  mkdirSync(dir, { recursive: true });
  const tmp = `${bin}.tmp-${process.pid}`;
  const src = join(NATIVE_DIR, p.toolchain);
  process.stdout.write(`building ${name} (bench/native/${p.toolchain}) into ${dir}\n`);
  if (p.toolchain === 'go') {
    await run('go', ['build', '-trimpath', '-o', tmp, p.target], src, {
      GOTOOLCHAIN: 'local',
      GOFLAGS: '-mod=readonly',
      CGO_ENABLED: '0',
    });
  } else {
    const target = join(cacheDir(), 'native', 'cargo-target');
    await run(
      'cargo',
      ['build', '--release', '--locked', '--bin', p.target, '--target-dir', target],
      src,
      {},
    );
    copyFileSync(join(target, 'release', p.target), tmp);
  }
  renameSync(tmp, bin);
  return bin;
}
