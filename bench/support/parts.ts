/**
 * The real parts the benchmarks run against, each started once per run on first use and stopped at the
 * end: a private NATS server (JetStream), the Python runtime serving bench/apps/echo, and the gateway
 * as its own child process (so its RSS can be read and it never shares an event loop with the load).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parse as parseYaml } from 'yaml';
import type { ResolvedApp } from '../../src/shared/contracts/seams.ts';
import { generateSigningKey, issueRunToken, type KeySet } from '../../src/shared/run-tokens.ts';
import { type NatsServer, startNats } from '../../test/harness/nats.ts';
import { freePort, type ManagedProcess, startProcess, waitFor } from '../../test/harness/process.ts';

const here = dirname(fileURLToPath(import.meta.url));
export const BENCH_DIR = join(here, '..');
export const REPO_ROOT = join(BENCH_DIR, '..');
export const PYTHON = join(REPO_ROOT, 'runtime', 'python', '.venv', 'bin', 'python');
export const ECHO_APP_DIR = join(BENCH_DIR, 'apps', 'echo');

/** Bound on a child (runtime, gateway, dispatcher) becoming ready; the machine may be busy. */
export const START_TIMEOUT_MS = 90_000;
/** Bound on a child stopping on SIGTERM before SIGKILL. */
export const STOP_GRACE_MS = 15_000;

export const PROJECT = 'bench';
export const APP = 'echo';

/** The benchmark app as every benchmark gateway resolves it: the echo runtime at `upstream`. */
export const benchApp = (upstream: string): ResolvedApp => ({
  projectId: PROJECT,
  appName: APP,
  runtime: 'cortex',
  upstream,
  ready: true,
  gracePeriodSeconds: 900,
  functions: ['echo', 'first'],
});
export const PLATFORM_KEY = 'bench-platform-key-0123456789abcdef';

export interface Runtime {
  url: string;
  port: number;
  proc: ManagedProcess;
}

/** The floor of the sync rows (bench/support/bare-proxy.ts): node:http + undici and nothing else. */
export interface BareProxy {
  url: string;
  pid: number;
  proc: ManagedProcess;
}

export interface GatewayChild {
  url: string;
  /** The gateway's ops server (/metrics with the Node.js default metrics). */
  opsUrl: string;
  pid: number;
  proc: ManagedProcess;
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * The gateway's NODE_OPTIONS as a pod of the chart gets them, so the benchmark gateway runs as a pod does:
 * first the heap V8 would size from the pod's memory limit (podHeapOptions), then the chart's own
 * (templates/gateway.yaml: values.yaml `gateway.nodeOptions` alone, e.g. the young generation's size; not
 * the image's `--enable-source-maps`), which win. BENCH_GATEWAY_NODE_ARGS come after them on the command line, so they win.
 */
export function chartGatewayNodeOptions(root = REPO_ROOT): string {
  const values = parseYaml(readFileSync(join(root, 'charts', 'apphost', 'values.yaml'), 'utf8')) as {
    gateway?: { nodeOptions?: string; resources?: { limits?: { memory?: string } } };
  };
  return [podHeapOptions(values.gateway?.resources?.limits?.memory), values.gateway?.nodeOptions ?? '']
    .join(' ')
    .trim();
}

/** The gateway's glibc malloc env as the chart gives it (values.yaml `gateway.malloc`). */
export function chartGatewayMallocEnv(root = REPO_ROOT): Record<string, string> {
  const values = parseYaml(readFileSync(join(root, 'charts', 'apphost', 'values.yaml'), 'utf8')) as {
    gateway?: { malloc?: Record<string, string | number> | null };
  };
  return Object.fromEntries(Object.entries(values.gateway?.malloc ?? {}).map(([k, v]) => [k, String(v)]));
}

/**
 * The bundled NATS servers' Go runtime env as the chart gives it (values.yaml `nats.bundled.goRuntime`,
 * e.g. GOGC and GOMEMLIMIT), so the benchmark's nats-server collects garbage as a pod of the chart does.
 * The environment the benchmark runs in wins (a trial of other settings: `GOGC=100 node bench/…`).
 */
export function chartNatsEnv(root = REPO_ROOT, env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const values = parseYaml(readFileSync(join(root, 'charts', 'apphost', 'values.yaml'), 'utf8')) as {
    nats?: { bundled?: { goRuntime?: Record<string, string | number> | null } };
  };
  return Object.fromEntries(
    Object.entries(values.nats?.bundled?.goRuntime ?? {}).map(([k, v]) => [k, env[k] ?? String(v)]),
  );
}

/**
 * The old generation's size V8 picks in a container with memory limit `limit` (a Kubernetes quantity):
 * Node hands V8 the cgroup limit, and V8 sizes the old generation at half of it on 64-bit (a `1Gi` pod:
 * 512 MiB, `heap_size_limit` 560 MiB with the young generation). The benchmark machine has no limit (V8:
 * 4 GiB), and the larger V8's heap limit, the more garbage it lets the old generation gather between full
 * GCs (docs/benchmarks.md#memory-of-the-gateway): without this the benchmark measures a heap no pod has.
 */
export function podHeapOptions(limit: string | undefined): string {
  const m = /^(\d+)(Mi|Gi)$/.exec(limit ?? '');
  if (!m) return '';
  const mib = Number(m[1]) * (m[2] === 'Gi' ? 1024 : 1);
  return `--max-old-space-size=${Math.floor(mib / 2)}`;
}

/** Bound on compiling the benchmark gateway (~10 s on a busy 2-core machine). */
export const TSC_TIMEOUT_MS = 180_000;

/**
 * Compiles `bench/gateway-entry.ts` and the modules it imports as the image's `dist/` is compiled (tsc with
 * tsconfig.build.json: the same JavaScript), into `<root>/bench/.out/gateway/`, bundles the entry as the
 * image's gateway is bundled (`<root>/hack/bundle.ts`, when the tree has it: bench/compare.ts compares
 * commits from before it too), and returns the entry's path. The image runs compiled, bundled JavaScript;
 * Node's type stripping of the sources costs ~25 MiB of RSS and loading ~445 modules one by one ~14 MiB
 * (docs/benchmarks.md#memory-of-the-gateway), so the benchmark gateway runs what a pod runs.
 */
export async function compileGatewayEntry(root = REPO_ROOT): Promise<string> {
  const out = join(root, 'bench', '.out', 'gateway');
  mkdirSync(out, { recursive: true });
  const tsconfig = join(out, 'tsconfig.json');
  writeFileSync(
    tsconfig,
    JSON.stringify({
      extends: join(root, 'tsconfig.build.json'),
      compilerOptions: { rootDir: root, outDir: out, noEmit: false },
      include: [],
      files: [join(root, 'bench', 'gateway-entry.ts')],
    }),
  );
  const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  await new Promise<void>((resolve, reject) => {
    execFile(process.execPath, [tsc, '-p', tsconfig], { timeout: TSC_TIMEOUT_MS }, (err, stdout) => {
      if (err) reject(new Error(`compiling the benchmark gateway failed: ${stdout || err.message}`));
      else resolve();
    });
  });
  const entry = join(out, 'bench', 'gateway-entry.js');
  const bundler = join(root, 'hack', 'bundle.ts');
  if (existsSync(bundler)) {
    const { bundleGatewayEntry } = (await import(pathToFileURL(bundler).href)) as {
      bundleGatewayEntry: (entry: string) => Promise<void>;
    };
    await bundleGatewayEntry(entry);
  }
  return entry;
}

/** Anonymous bytes of a process's resident memory (smaps_rollup); the rest of its RSS is file-backed. */
export function anonymousBytes(pid: number): number {
  try {
    const m = /^Anonymous:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** Reads a `Vm*` field of /proc/<pid>/status in bytes (NaN when unreadable, e.g. not Linux). */
export function procStatusBytes(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    return m ? Number(m[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat (NaN when unreadable). */
export function procCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15 (1-based).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return Number.NaN;
  }
}

/** A process and its children (the gateway processes of a primary), from /proc/<pid>/task/<pid>/children. */
export function processTree(pid: number): number[] {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    return [pid, ...(children ? children.split(' ').map(Number) : [])];
  } catch {
    return [pid];
  }
}

/** procCpuSeconds of `pid` and its children, added up. */
export function treeCpuSeconds(pid: number): number {
  return processTree(pid).reduce((sum, p) => sum + procCpuSeconds(p), 0);
}

/** Write and writev syscalls `pid` has made so far (`syscw` of /proc/<pid>/io; 0 when unreadable). */
export function writeSyscalls(pid: number): number {
  try {
    return Number(/^syscw: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** procStatusBytes of `pid` and its children, added up. */
export function treeStatusBytes(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  return processTree(pid).reduce((sum, p) => sum + procStatusBytes(p, field), 0);
}

/**
 * Resident bytes `pid` adds to a pod beside `base`: its anonymous memory and its file-backed pages of
 * files `base` does not map (libc, mapped by both, is resident once), from /proc/<pid>/smaps. NaN when
 * unreadable.
 */
export function addedRssBytes(pid: number, base: number): number {
  try {
    const mapped = (p: number) =>
      readFileSync(`/proc/${p}/smaps`, 'utf8')
        .split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/)
        .map((b) => ({
          file: (b.split('\n')[0] ?? '').split(/\s+/).slice(5).join(' '),
          rssKb: Number(/\nRss:\s+(\d+) kB/.exec(b)?.[1] ?? 0),
        }));
    const baseFiles = new Set(
      mapped(base)
        .map((m) => m.file)
        .filter((f) => f.startsWith('/')),
    );
    return mapped(pid)
      .filter((m) => !baseFiles.has(m.file))
      .reduce((sum, m) => sum + m.rssKb * 1024, 0);
  } catch {
    return Number.NaN;
  }
}

/** The pid of the nats-server listening on `port` (from /proc/<pid>/cmdline; 0 when not found). */
export function natsServerPid(port: number): number {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      if (cmd[0]?.endsWith('nats-server') && cmd.includes(String(port))) return Number(d);
    } catch {}
  }
  return 0;
}

/** USER_HZ on Linux (getconf CLK_TCK), which /proc reports CPU times in. */
export const CLOCK_TICKS_PER_SECOND = 100;

/** Starts `node <script>` and waits for a stdout line starting with `ready`; returns the child and that line. */
export async function startNodeChild(
  name: string,
  script: string,
  env: NodeJS.ProcessEnv,
  ready: string,
  logDir: string,
  nodeArgs: string[] = [],
): Promise<{ proc: ManagedProcess; line: string; logFile: string }> {
  // BENCH_PROFILE_DIR (bench/profile.ts): every node child writes a CPU profile into <dir>/<name>/ as it exits.
  const profileDir = process.env.BENCH_PROFILE_DIR;
  const profile = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, name)}`] : [];
  return startChild(name, process.execPath, [...profile, ...nodeArgs, script], env, ready, logDir);
}

/** Starts `command args` (any program) and waits, up to START_TIMEOUT_MS, for a stdout line starting with `ready`. */
export async function startChild(
  name: string,
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: string,
  logDir: string,
): Promise<{ proc: ManagedProcess; line: string; logFile: string }> {
  const logFile = join(logDir, `${name}.log`);
  const proc = startProcess(name, command, args, {
    logFile,
    env: { ...process.env, ...env },
  });
  let line = '';
  let buf = '';
  proc.child.stdout?.on('data', (c: Buffer) => {
    buf += c.toString('utf8');
    const found = buf.split('\n').find((l) => l.startsWith(ready));
    if (found && !line) line = found;
  });
  let exited = false;
  proc.child.once('exit', () => {
    exited = true;
  });
  await waitFor(
    `${name} to print "${ready}"`,
    async () => {
      if (exited) throw new Error(`${name} exited early; see ${logFile}`);
      return line !== '';
    },
    START_TIMEOUT_MS,
    50,
  );
  return { proc, line, logFile };
}

export interface Parts {
  readonly logDir: string;
  nats(): Promise<NatsServer>;
  runtime(): Promise<Runtime>;
  /** The gateway child (run worker off: async runs only queue, so the 202 path is what is measured). */
  gateway(): Promise<GatewayChild>;
  /** Another gateway process with its run worker on (default settings); the caller stops it. */
  workerGateway(): Promise<GatewayChild>;
  /** A gateway whose calls bypass the balancer (APPHOST_BENCH_LIMITER=off): the limiter's baseline. */
  gatewayNoLimiter(): Promise<GatewayChild>;
  /** The same gateway as `gateway()` as a primary with 2 processes (APPHOST_GATEWAY_PROCESSES=2). */
  gatewayTwoProcesses(): Promise<GatewayChild>;
  /**
   * The same gateway in native mode (APPHOST_GATEWAY_DATA_PLANE=native): build/bin/apphost-dataplane
   * (`make build-native`) owns the port and, in step 4, hands every call to Node. Its pid is Node's; the
   * data plane is its child.
   */
  gatewayNative(): Promise<GatewayChild>;
  /**
   * Another gateway as `gatewayNative()` starts it, from the compiled entry `entry` (compileGatewayEntry of
   * another tree) with data plane binary `bin` and `nodeArgs`; the caller stops it (bench/pod-idle.ts).
   */
  startNativeGateway(name: string, entry: string, bin: string, nodeArgs: string[]): Promise<GatewayChild>;
  /** The same in node mode (no data plane): from `entry` with `nodeArgs`; the caller stops it (bench/ops-alloc.ts). */
  startNodeGateway(name: string, entry: string, nodeArgs: string[]): Promise<GatewayChild>;
  /**
   * A nats-server of its own with an empty store (the chart's Go env), and the same native gateway as
   * `gatewayNative()` on it: a row that must start from a fresh JetStream, as the first rows on `nats()` do
   * (bench/async-accept.ts). Both are stopped with the rest.
   */
  gatewayNativeOnFreshNats(): Promise<{ gateway: GatewayChild; nats: NatsServer }>;
  /** A bare Node proxy (node:http + undici dispatch) to the runtime: the floor of the sync rows. */
  bareProxy(): Promise<BareProxy>;
  /** A run token for PROJECT, valid for the whole run. */
  token(): Promise<string>;
  stop(): Promise<void>;
}

export function createParts(opts: { gatewayLogLevel: string; gatewayNodeArgs: string[] }): Parts {
  const logDir = tempDir('apphost-bench-');
  const stops: Array<() => Promise<void>> = [];
  const once = <T>(f: () => Promise<T>) => {
    let p: Promise<T> | undefined;
    return () => {
      p ??= f();
      return p;
    };
  };

  const keys = once(async (): Promise<{ set: KeySet; file: string }> => {
    const set = { keys: [await generateSigningKey()] };
    const file = join(logDir, 'run-token-keys.json');
    writeFileSync(file, JSON.stringify(set), { mode: 0o600 });
    return { set, file };
  });

  const nats = once(async () => {
    const n = await startNats({ env: chartNatsEnv() });
    stops.push(() => n.stop());
    return n;
  });

  const runtime = once(async (): Promise<Runtime> => {
    if (!existsSync(PYTHON)) {
      throw new Error(`no Python runtime at ${PYTHON}: run 'make deps-python' (or 'make bench', which does)`);
    }
    const port = await freePort();
    const proc = startProcess(
      'runtime',
      PYTHON,
      [
        '-m',
        'apphost_runtime',
        '--app-dir',
        ECHO_APP_DIR,
        '--port',
        String(port),
        '--host',
        '127.0.0.1',
        '--log-level',
        'warning',
        '--grace-seconds',
        '2',
      ],
      { logFile: join(logDir, 'runtime.log'), cwd: join(REPO_ROOT, 'runtime', 'python') },
    );
    stops.push(() => proc.stop(STOP_GRACE_MS));
    const url = `http://127.0.0.1:${port}`;
    await waitFor('runtime /ready', async () => (await fetch(`${url}/ready`)).ok, START_TIMEOUT_MS);
    return { url, port, proc };
  });

  // Compiled on first use, once per run.
  const gatewayEntry = once(() => compileGatewayEntry());

  const startGateway = async (
    name: string,
    worker: boolean,
    limiter = true,
    processes = 1,
    extraEnv: Record<string, string> = {},
    variant?: { entry: string; nodeArgs: string[] },
  ): Promise<GatewayChild> => {
    const [n, rt, k, port, opsPort, entry] = await Promise.all([
      nats(),
      runtime(),
      keys(),
      freePort(),
      freePort(),
      variant?.entry ?? gatewayEntry(),
    ]);
    const app = benchApp(rt.url);
    const { proc, line } = await startNodeChild(
      name,
      entry,
      {
        NATS_URL: n.url,
        APPHOST_LOG_LEVEL: opts.gatewayLogLevel,
        APPHOST_OPS_PORT: String(opsPort),
        APPHOST_GATEWAY_PORT: String(port),
        APPHOST_GATEWAY_HOST: '127.0.0.1',
        APPHOST_PLATFORM_KEY: PLATFORM_KEY,
        APPHOST_RUN_TOKEN_KEYS_FILE: k.file,
        APPHOST_RUN_WORKER: String(worker),
        APPHOST_GATEWAY_PROCESSES: String(processes),
        APPHOST_BENCH_APPS: JSON.stringify([app]),
        NODE_OPTIONS: chartGatewayNodeOptions(),
        ...chartGatewayMallocEnv(),
        ...(limiter ? {} : { APPHOST_BENCH_LIMITER: 'off' }),
        ...extraEnv,
      },
      'listening ',
      logDir,
      variant?.nodeArgs ?? opts.gatewayNodeArgs,
    );
    const pid = Number(line.split(' ')[2]);
    return { url: `http://127.0.0.1:${port}`, opsUrl: `http://127.0.0.1:${opsPort}`, pid, proc };
  };

  /** Native mode's env: the data plane binary `bin` on the gateway's port, its socket in a directory of its own. */
  const nativeEnv = (bin: string) => ({
    APPHOST_GATEWAY_DATA_PLANE: 'native',
    APPHOST_GATEWAY_DATA_PLANE_BIN: bin,
    APPHOST_GATEWAY_DATA_PLANE_DIR: tempDir('apphost-bench-dp-'),
  });

  const gateway = once(async () => {
    const g = await startGateway('gateway', false);
    stops.push(() => g.proc.stop(STOP_GRACE_MS));
    return g;
  });

  const gatewayNoLimiter = once(async () => {
    const g = await startGateway('gateway-no-limiter', false, false);
    stops.push(() => g.proc.stop(STOP_GRACE_MS));
    return g;
  });

  const dataPlaneBin = () => {
    const bin = join(REPO_ROOT, 'build', 'bin', 'apphost-dataplane');
    if (!existsSync(bin)) throw new Error(`${bin} is missing: run \`make build-native\``);
    return bin;
  };

  const gatewayNative = once(async () => {
    const g = await startGateway('gateway-native', false, true, 1, nativeEnv(dataPlaneBin()));
    stops.push(() => g.proc.stop(STOP_GRACE_MS));
    return g;
  });

  const gatewayNativeOnFreshNats = once(async () => {
    const bin = dataPlaneBin();
    const n = await startNats({ env: chartNatsEnv() });
    stops.push(() => n.stop());
    const g = await startGateway('gateway-native-fresh-nats', false, true, 1, {
      ...nativeEnv(bin),
      NATS_URL: n.url,
    });
    stops.push(() => g.proc.stop(STOP_GRACE_MS));
    return { gateway: g, nats: n };
  });

  const gatewayTwoProcesses = once(async () => {
    const g = await startGateway('gateway-2-processes', false, true, 2);
    stops.push(() => g.proc.stop(STOP_GRACE_MS));
    return g;
  });

  const bareProxy = once(async (): Promise<BareProxy> => {
    const [rt, port] = await Promise.all([runtime(), freePort()]);
    // The gateway's node flags and malloc env, so the two differ only in what they run per call.
    const { proc, line } = await startNodeChild(
      'bare-proxy',
      join(BENCH_DIR, 'support', 'bare-proxy.ts'),
      {
        BARE_PROXY_UPSTREAM: rt.url,
        BARE_PROXY_PORT: String(port),
        NODE_OPTIONS: chartGatewayNodeOptions(),
        ...chartGatewayMallocEnv(),
      },
      'listening ',
      logDir,
    );
    stops.push(() => proc.stop(STOP_GRACE_MS));
    return { url: `http://127.0.0.1:${port}`, pid: Number(line.split(' ')[2]), proc };
  });

  const token = once(async () =>
    issueRunToken((await keys()).set, PROJECT, new Date(Date.now() + 6 * 3600_000)),
  );

  return {
    logDir,
    nats,
    runtime,
    gateway,
    workerGateway: () => startGateway('gateway-worker', true),
    gatewayNoLimiter,
    gatewayTwoProcesses,
    gatewayNative,
    startNativeGateway: (name, entry, bin, nodeArgs) =>
      startGateway(name, false, true, 1, nativeEnv(bin), { entry, nodeArgs }),
    startNodeGateway: (name, entry, nodeArgs) => startGateway(name, false, true, 1, {}, { entry, nodeArgs }),
    gatewayNativeOnFreshNats,
    bareProxy,
    token,
    async stop() {
      for (const s of stops.reverse()) await s().catch(() => {});
    },
  };
}
