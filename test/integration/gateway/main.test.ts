/**
 * `apphost gateway` as a real process (src/cli → src/gateway/main.ts) against the test kube-apiserver and
 * a private NATS: it starts, watches Apps, answers with the right errors, reports ready, and stops
 * cleanly on SIGTERM — run from the TypeScript sources, and built as the image builds it (`dist/`, tsc
 * then hack/bundle.ts: the gateway one bundled module).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { bundleGatewayEntry } from '../../../hack/bundle.ts';
import { APP_PLURAL, type App, GROUP, PROJECT_LABEL, VERSION } from '../../../src/apis/v1alpha1/types.ts';
import { generateSigningKey, issueRunToken, type KeySet } from '../../../src/shared/run-tokens.ts';
import { applyProjectCrds } from '../../harness/crds.ts';
import { createTestNamespace, testKubeConfig } from '../../harness/kube.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { freePort, waitFor } from '../../harness/process.ts';
import { REPO_ROOT, tempDir } from './helpers.ts';

const exec = promisify(execFile);
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
/** Bound on compiling src/ with tsc (~10 s on a busy 2-core machine) and bundling it. */
const BUILD_TIMEOUT_MS = 180_000;
const kc = testKubeConfig();
/** The gateway's node flags as the chart gives them (values.yaml `gateway.nodeOptions`). */
const CHART_NODE_OPTIONS = (
  parseYaml(readFileSync(join(REPO_ROOT, 'charts', 'apphost', 'values.yaml'), 'utf8')) as {
    gateway: { nodeOptions: string };
  }
).gateway.nodeOptions;
/** `--max-semi-space-size` of those flags, in MiB: V8's young generation is at most twice it. */
const CHART_SEMI_SPACE_MIB = Number(/--max-semi-space-size=(\d+)/.exec(CHART_NODE_OPTIONS)?.[1]);

/** src/ built as the image's /app is (tsc, then the gateway bundled), with this checkout's node_modules. */
async function buildDist(): Promise<string> {
  const app = tempDir('apphost-gw-dist-');
  const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  await exec(
    process.execPath,
    [tsc, '-p', join(REPO_ROOT, 'tsconfig.build.json'), '--outDir', join(app, 'dist')],
    {
      timeout: BUILD_TIMEOUT_MS,
    },
  );
  // Before bundling: esbuild resolves the gateway's packages from the bundled file's folder upwards.
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(app, 'node_modules'));
  await bundleGatewayEntry(join(app, 'dist', 'gateway', 'main.js'));
  writeFileSync(join(app, 'package.json'), readFileSync(join(REPO_ROOT, 'package.json')));
  return join(app, 'dist', 'cli', 'main.js');
}

describe.each([
  { build: 'TypeScript sources', main: async () => join(REPO_ROOT, 'src/cli/main.ts') },
  { build: 'built and bundled', main: buildDist },
])('apphost gateway from $build', ({ build, main }) => {
  const project = `main-${Date.now().toString(36)}-${build === 'built and bundled' ? 'b' : 's'}`;
  const dir = tempDir('apphost-gw-main-');
  let nats: NatsServer;
  let ns: string;
  let child: ChildProcess | undefined;
  let keys: KeySet;
  let port: number;
  let opsPort: number;
  let cli: string;

  beforeAll(async () => {
    cli = await main();
    await applyProjectCrds();
    [nats, ns, keys, port, opsPort] = await Promise.all([
      startNats(),
      createTestNamespace(kc, 'gw-main', { [PROJECT_LABEL]: project }),
      generateSigningKey().then((k) => ({ keys: [k] })),
      freePort(),
      freePort(),
    ]);
    const app: App = {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'App',
      metadata: { name: 'hello', namespace: ns },
      spec: { runtime: 'cortex', image: 'example/hello:1' },
    };
    await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: APP_PLURAL,
      body: app,
    });
    // As on a fresh install: the run-token key file appears only after the gateway started (issue 21.3).
    const keysFile = join(dir, 'run-token-keys.json');
    child = spawn(process.execPath, [cli, 'gateway'], {
      env: {
        ...process.env,
        KUBECONFIG: inject('kubeconfigPath'),
        NATS_URL: nats.url,
        APPHOST_GATEWAY_HOST: '127.0.0.1',
        APPHOST_GATEWAY_PORT: String(port),
        APPHOST_OPS_PORT: String(opsPort),
        APPHOST_PLATFORM_KEY: 'main-test-platform-key-0123',
        APPHOST_RUN_TOKEN_KEYS_FILE: keysFile,
        APPHOST_GATEWAY_DRAIN_TIMEOUT_MS: '5000',
        APPHOST_RUN_STOP_TIMEOUT_MS: '5000',
        APPHOST_GATEWAY_COLD_START_TIMEOUT_MS: '1000',
        APPHOST_GATEWAY_CONNECTION_HANDOVER_MS: '500',
        // As the chart runs it (--expose-gc: the start-up heap given back, src/shared/startup-heap.ts).
        NODE_OPTIONS: CHART_NODE_OPTIONS,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const log = createWriteStream(join(dir, 'gateway.log'));
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    // Without its key set the gateway runs, not ready, rather than exiting into a crash loop.
    let notReadyBody = '';
    await waitFor(
      `gateway /readyz answering 503 while the key file is missing (log: ${dir}/gateway.log)`,
      async () => {
        const res = await fetch(`http://127.0.0.1:${opsPort}/readyz`);
        notReadyBody = await res.text();
        return res.status === 503;
      },
      START_TIMEOUT_MS,
    );
    expect(notReadyBody).toMatch(/run-token keys/);
    expect(child.exitCode).toBeNull();
    writeFileSync(keysFile, JSON.stringify(keys));
    await waitFor(
      `gateway /readyz (log: ${dir}/gateway.log)`,
      async () => (await fetch(`http://127.0.0.1:${opsPort}/readyz`)).ok,
      START_TIMEOUT_MS,
    );
  });

  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    if (ns)
      await kc
        .makeApiClient(CoreV1Api)
        .deleteNamespace({ name: ns })
        .catch(() => undefined);
    await nats?.stop();
  });

  it("gives back the young generation its start-up grew, with the chart's node flags", async () => {
    // Start-up grows V8's young generation to its bound (2 × --max-semi-space-size) and an idle process
    // would keep those pages ~100 s (V8's memory reducer does not start at idle): once serving, the
    // gateway runs one memory-reducing collection, which shrinks it to V8's minimum.
    expect(CHART_SEMI_SPACE_MIB).toBeGreaterThan(1);
    const metrics = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
    const newSpace = Number(/^nodejs_heap_space_size_total_bytes\{space="new"\} (\d+)/m.exec(metrics)?.[1]);
    expect(newSpace).toBeGreaterThan(0);
    expect(newSpace).toBeLessThan(2 * CHART_SEMI_SPACE_MIB * 1024 * 1024);
  });

  it('serves the run endpoint from the cluster view and stops cleanly on SIGTERM', async () => {
    const token = await issueRunToken(keys, project, new Date(Date.now() + 3600_000));
    const post = async (path: string, auth = true) => {
      const res = await request(`http://127.0.0.1:${port}${path}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(auth ? { authorization: `Bearer ${token}` } : {}),
        },
        body: '{}',
      });
      const body = (await res.body.json()) as { error?: { code: string } };
      return { status: res.statusCode, code: body.error?.code, id: res.headers['x-request-id'] };
    };
    expect(await post(`/v4/${project}/hello/echo`, false)).toMatchObject({
      status: 401,
      code: 'unauthenticated',
    });
    expect(await post(`/v4/${project}/nope/echo`)).toMatchObject({ status: 404, code: 'not_found' });
    expect(await post(`/v4/${project}/nope/echo?async=true`)).toMatchObject({
      status: 404,
      code: 'not_found',
    });
    // The App exists but no pod of it is ready: the call is held for the cold-start bound, then refused.
    const notReady = await post(`/v4/${project}/hello/echo`);
    expect(notReady).toMatchObject({ status: 503, code: 'cold_start_timeout' });
    expect(notReady.id).toBeTruthy();

    const metrics = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
    expect(metrics).toContain('apphost_gateway_requests_total');
    expect(metrics).toContain('apphost_runs_queue_depth');

    const exited = new Promise<number | null>((resolve) => child?.once('exit', (code) => resolve(code)));
    child?.kill('SIGTERM');
    const code = await Promise.race([
      exited,
      new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), STOP_TIMEOUT_MS)),
    ]);
    expect(code).toBe(0);
  });

  if (build === 'built and bundled')
    it('loads the gateway as one module: no static import, the client-node fallback from dist/', () => {
      const bundle = join(dirname(dirname(cli)), 'gateway', 'main.js');
      const text = readFileSync(bundle, 'utf8');
      // Node's built-ins too are taken with process.getBuiltinModule (hack/bundle.ts): no ES module facade.
      expect([...text.matchAll(/^import\s[^;]*?["']([^"']+)["']/gm)].map((m) => m[1])).toEqual([]);
      expect(text).toContain('process.getBuiltinModule("node:http")');
      const lazy = [...text.matchAll(/\bimport\(["']([^"']+)["']\)/g)].map((m) => m[1] ?? '');
      expect(lazy).toEqual(expect.arrayContaining(['../shared/kube/config.js', '../shared/kube/client.js']));
      for (const spec of lazy.filter((s) => s.startsWith('.')))
        expect(existsSync(resolve(dirname(bundle), spec))).toBe(true);
      // yaml (a kubeconfig file only) comes from node_modules when needed; of zod's locales only English.
      expect(lazy).toContain('yaml');
      expect(text).not.toMatch(/^\/\/ \S*node_modules\/yaml\//m);
      const locales = [...text.matchAll(/^\/\/ \S*node_modules\/zod\/v4\/locales\/(\S+)$/gm)].map(
        (m) => m[1],
      );
      expect(locales).toEqual(['en.js']);
    });

  if (build === 'built and bundled')
    it("loads the gateway without Node's own fetch bundle and web streams, which it does not use", async () => {
      // An ES module import of node:http would load them (its WebSocket/MessageEvent getters, read by
      // Node's facade): ~2 MiB of every idle gateway (docs/benchmarks.md, thirteenth round).
      const bundle = join(dirname(dirname(cli)), 'gateway', 'main.js');
      const script = `
        await import(${JSON.stringify(bundle)});
        process.stdout.write(JSON.stringify(process.moduleLoadList.filter((m) => /undici|webstreams/.test(m))));`;
      const { stdout } = await exec(process.execPath, ['--input-type=module', '-e', script], {
        timeout: START_TIMEOUT_MS,
      });
      expect(JSON.parse(stdout)).toEqual([]);
    });

  if (build === 'built and bundled')
    it("loads no package of node_modules in the CLI's own modules (the bundle has its own copy)", async () => {
      const script = `
        import { registerHooks } from 'node:module';
        const seen = [];
        registerHooks({ resolve(s, c, next) { const r = next(s, c); if (r.url.includes('/node_modules/')) seen.push(r.url); return r; } });
        await import(${JSON.stringify(join(dirname(cli), 'commands.js'))});
        process.stdout.write(JSON.stringify(seen));`;
      const { stdout } = await exec(process.execPath, ['--input-type=module', '-e', script], {
        timeout: START_TIMEOUT_MS,
      });
      expect(JSON.parse(stdout)).toEqual([]);
    });
});
