/**
 * `node bench/gateway-idle.ts <name>=<commit>[:<node flags>] ...`: the idle memory of a real `apphost gateway`
 * (compiled `dist/cli/main.js gateway`, its gateway bundled as `make build` does when the commit has
 * hack/bundle.ts; the chart's NODE_OPTIONS and malloc env) of each commit, watching Apps, DomainAssignments, EndpointSlices, project namespaces and the run-token key Secret of a test control
 * plane (etcd + kube-apiserver, test/harness), with NATS. Rounds are interleaved (order reversed every
 * other round); per round and variant: RSS (VmRSS) `IDLE_SECONDS` after /readyz answered 200, split into
 * file-backed (node's binary and libraries) and anonymous memory (V8's heap, malloc, Wasm code) from
 * /proc/<pid>/smaps_rollup, and the V8 heap used then (the gateway's /metrics). IDLE_ACCESS=in-cluster
 * (default) gives each gateway what a pod has — KUBERNETES_SERVICE_HOST/PORT and a service-account token and CA under
 * /var/run/secrets/kubernetes.io/serviceaccount, in a private mount namespace (`unshare -m`, root only), no
 * KUBECONFIG and an empty HOME; IDLE_ACCESS=kubeconfig a kubeconfig file instead. Settings: IDLE_ROUNDS (3),
 * IDLE_SECONDS (5), IDLE_SMAPS_DIR (unset: with a directory, each gateway's /proc/<pid>/smaps at that moment
 * is copied there as <name>-<round>.smaps, to see which mappings differ). A variant's node flags come
 * after the chart's in NODE_OPTIONS (so they win, e.g. `--max-semi-space-size=4`). The chart's options are this checkout's for every variant: to measure a commit
 * as its own chart ran it, give its difference as flags (before the ninth round the chart also passed
 * `--enable-source-maps`). Nothing is written to RESULTS.md.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { request } from 'undici';
import { generateSigningKey, RUN_TOKEN_KEYS_SECRET_KEY } from '../src/shared/run-tokens.ts';
import { binaryPath } from '../test/harness/binaries.ts';
import { startControlPlane } from '../test/harness/controlplane.ts';
import { startNats } from '../test/harness/nats.ts';
import { freePort, waitFor } from '../test/harness/process.ts';
import { exportCommitTree } from './support/commit-tree.ts';
import {
  anonymousBytes,
  chartGatewayMallocEnv,
  chartGatewayNodeOptions,
  PLATFORM_KEY,
  procStatusBytes,
  REPO_ROOT,
  START_TIMEOUT_MS,
  STOP_GRACE_MS,
  TSC_TIMEOUT_MS,
  tempDir,
} from './support/parts.ts';
import { loadAverageNow } from './support/report.ts';

const exec = promisify(execFile);
const ROUNDS = Number(process.env.IDLE_ROUNDS ?? 3);
const IDLE_SECONDS = Number(process.env.IDLE_SECONDS ?? 5);
const KEYS_NAMESPACE = 'apphost-system';
const SMAPS_DIR = process.env.IDLE_SMAPS_DIR;
// Made before any gateway starts: a missing directory would otherwise end the run at its first copy.
if (SMAPS_DIR) mkdirSync(SMAPS_DIR, { recursive: true });
const IN_CLUSTER = (process.env.IDLE_ACCESS ?? 'in-cluster') === 'in-cluster';
/** Mounts a tmpfs over /run (= /var/run) in the gateway's own mount namespace and puts the token and CA there. */
const IN_CLUSTER_SHELL =
  'mount -t tmpfs tmpfs /run && d=/run/secrets/kubernetes.io/serviceaccount && mkdir -p $d && cp "$SA_SOURCE"/token "$SA_SOURCE"/ca.crt $d/ && exec "$@"';

const specs = process.argv.slice(2).map((arg) => {
  const m = /^([\w.-]+)=([^:]+)(?::(.*))?$/.exec(arg);
  if (!m?.[1] || !m[2]) throw new Error(`"${arg}" is not <name>=<commit>[:<node flags>]`);
  return { name: m[1], commit: m[2], flags: m[3] ?? '' };
});
if (specs.length < 1) {
  process.stderr.write('usage: node bench/gateway-idle.ts <name>=<commit>[:<node flags>] ...\n');
  process.exit(2);
}
const load = loadAverageNow;
const mib = (bytes: number) => (bytes / 1048576).toFixed(1);

/** Each commit's src/ compiled as the image's dist/ is. */
const mains = new Map<string, string>();
for (const { commit } of specs) {
  if (mains.has(commit)) continue;
  const dir = exportCommitTree(
    commit,
    ['src', 'hack', 'tsconfig.json', 'tsconfig.build.json'],
    'apphost-idle-',
  );
  const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  await exec(process.execPath, [tsc, '-p', join(dir, 'tsconfig.build.json')], { timeout: TSC_TIMEOUT_MS });
  // As `make build` and the image: the gateway bundled, from commits that bundle it (hack/bundle.ts).
  const bundler = join(dir, 'hack', 'bundle.ts');
  if (existsSync(bundler))
    await exec(process.execPath, [bundler, join(dir, 'dist')], { timeout: TSC_TIMEOUT_MS });
  mains.set(commit, join(dir, 'dist', 'cli', 'main.js'));
}

const logs = tempDir('apphost-idle-logs-');
const [cp, nats] = await Promise.all([startControlPlane(), startNats()]);
try {
  const kubectl = (...args: string[]) =>
    exec(binaryPath('kubectl'), ['--kubeconfig', cp.kubeconfigPath, ...args], { maxBuffer: 1 << 24 });
  await kubectl('apply', '--server-side', '-f', join(REPO_ROOT, 'crds'));
  await kubectl('create', 'namespace', KEYS_NAMESPACE);
  const keysFile = join(logs, 'keys.json');
  mkdirSync(logs, { recursive: true });
  writeFileSync(keysFile, JSON.stringify({ keys: [await generateSigningKey()] }));
  await kubectl(
    'create',
    'secret',
    'generic',
    'apphost-run-token-keys',
    '-n',
    KEYS_NAMESPACE,
    `--from-file=${RUN_TOKEN_KEYS_SECRET_KEY}=${keysFile}`,
  );
  const sa = tempDir('apphost-idle-sa-');
  writeFileSync(join(sa, 'token'), cp.token);
  writeFileSync(join(sa, 'ca.crt'), Buffer.from(cp.caData, 'base64'));
  const apiserver = new URL(cp.server);
  const { KUBECONFIG: _, ...inherited } = process.env;
  const env = {
    ...inherited,
    ...chartGatewayMallocEnv(),
    NODE_OPTIONS: chartGatewayNodeOptions(),
    ...(IN_CLUSTER
      ? {
          HOME: tempDir('apphost-idle-home-'),
          KUBERNETES_SERVICE_HOST: apiserver.hostname,
          KUBERNETES_SERVICE_PORT: apiserver.port,
          SA_SOURCE: sa,
        }
      : { KUBECONFIG: cp.kubeconfigPath }),
    NATS_URL: nats.url,
    APPHOST_PLATFORM_KEY: PLATFORM_KEY,
    APPHOST_GATEWAY_HOST: '127.0.0.1',
    APPHOST_LOG_LEVEL: 'warn',
  };
  process.stdout.write(
    `access: ${IN_CLUSTER ? 'in-cluster' : 'kubeconfig'}; NODE_OPTIONS=${env.NODE_OPTIONS}; load ${load()}\n`,
  );
  const results = new Map<string, Array<{ rss: number; anon: number; heap: number }>>();
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? specs : [...specs].reverse();
    for (const { name, commit, flags } of order) {
      const [port, opsPort] = await Promise.all([freePort(), freePort()]);
      // Spawned directly (not through the harness's watchdog shell) so its pid is the gateway's own.
      const gateway = [process.execPath, mains.get(commit) ?? '', 'gateway'];
      const [command, ...args] = IN_CLUSTER
        ? ['unshare', '-m', 'sh', '-c', IN_CLUSTER_SHELL, 'sh', ...gateway]
        : gateway;
      // unshare and sh exec the next program: the pid is the gateway's.
      const child = spawn(command ?? '', args, {
        env: {
          ...env,
          NODE_OPTIONS: `${env.NODE_OPTIONS} ${flags}`.trim(),
          APPHOST_GATEWAY_PORT: String(port),
          APPHOST_OPS_PORT: String(opsPort),
        },
        stdio: ['ignore', openSync(join(logs, `${name}-${round}.log`), 'w'), 'inherit'],
      });
      const exited = new Promise((r) => child.once('exit', r));
      try {
        await waitFor(
          `${name} /readyz`,
          async () => {
            const res = await request(`http://127.0.0.1:${opsPort}/readyz`).catch(() => undefined);
            await res?.body.dump();
            return res?.statusCode === 200;
          },
          START_TIMEOUT_MS,
          100,
        );
        await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
        const rss = procStatusBytes(child.pid ?? 0, 'VmRSS');
        const anon = anonymousBytes(child.pid ?? 0);
        if (SMAPS_DIR)
          writeFileSync(
            join(SMAPS_DIR, `${name}-${round}.smaps`),
            readFileSync(`/proc/${child.pid}/smaps`, 'utf8'),
          );
        const metrics = await (await request(`http://127.0.0.1:${opsPort}/metrics`)).body.text();
        const heap = Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(metrics)?.[1] ?? Number.NaN);
        results.set(name, [...(results.get(name) ?? []), { rss, anon, heap }]);
        process.stdout.write(
          `round ${round + 1} ${name}: idle RSS ${mib(rss)} MiB (file-backed ${mib(rss - anon)}, anonymous ${mib(anon)}), heap used ${mib(heap)} MiB (load ${load()})\n`,
        );
      } finally {
        child.kill('SIGTERM');
        const kill = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
        await exited;
        clearTimeout(kill);
      }
    }
  }
  for (const { name } of specs) {
    const rs = results.get(name) ?? [];
    process.stdout.write(
      `${name}: idle RSS ${rs.map((r) => mib(r.rss)).join(' / ')} MiB (anonymous ${rs.map((r) => mib(r.anon)).join(' / ')}); heap used ${rs.map((r) => mib(r.heap)).join(' / ')} MiB\n`,
    );
  }
  process.stdout.write(`load at the end ${load()}\n`);
} finally {
  await Promise.all([cp.stop(), nats.stop()]);
}
