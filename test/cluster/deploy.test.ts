/**
 * `apphost deploy` against a cluster install, as a person runs it: the real CLI (a child process) with
 * `--base-url` = the management API behind the ingress and a service-account token. The app has a pip
 * dependency (a wheel inside the folder, no package index); its dependency set is built by a Kubernetes
 * Job; the App's pod gets the bundle and the set through its init container, checked by sha256; the call
 * through the ingress answers. A change rolls out under load with no failed call, the set reused; a failed
 * build leaves the version that served.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWheel } from '../harness/wheel.ts';
import { clusterKubeConfig, createProject, ingressRequest, kubectl, MANAGEMENT_HOST } from './fixture.ts';
import { REPO } from './platform.ts';
import { call, firstOk, management, runToken, serviceAccountToken } from './user.ts';

/** Bound on one `apphost deploy`: a build Job (pip in the runtime image) and a rollout on a shared machine. */
const DEPLOY_MS = 300_000;
const PYTHON = join(REPO, 'runtime', 'python', '.venv', 'bin', 'python');
const MAIN = join(REPO, 'src', 'cli', 'main.ts');

const lastLine = (s: string) => s.trimEnd().split('\n').at(-1) ?? '';

/**
 * {base_url} on this machine: a forwarder to the ingress with the management host's name (the ingress
 * routes by Host; the runner reaches it on a loopback port), streaming both ways (uploads, SSE logs).
 */
/** Headers of one hop that undici refuses to forward (it sets its own). */
const HOP_BY_HOP = new Set([
  'host',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'expect',
  'te',
  'trailer',
  'proxy-connection',
]);

async function forwardToManagement(): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(req.headers))
      if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
    ingressRequest(MANAGEMENT_HOST, req.url ?? '/', {
      method: (req.method ?? 'GET') as 'GET',
      headers,
      ...(req.method === 'GET' || req.method === 'HEAD' ? {} : { body: req }),
    })
      .then(async (up) => {
        const out: Record<string, string | string[]> = {};
        for (const [k, v] of Object.entries(up.headers))
          if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
        res.writeHead(up.statusCode, out);
        await pipeline(up.body, res);
      })
      .catch((err: Error) => {
        process.stderr.write(`forwarder: ${req.method} ${req.url}: ${err.message}\n`);
        if (res.headersSent) res.destroy();
        else res.writeHead(502, { 'content-type': 'text/plain' }).end(`forwarder: ${err.message}`);
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Bound on each case: a deploy plus the calls and checks around it. */
const CASE_MS = DEPLOY_MS + 120_000;

describe('apphost deploy on a real cluster', () => {
  let kc: KubeConfig;
  let project: string;
  let saToken: string;
  let token: string;
  let dir: string;
  let app: string;
  let baseUrl: { url: string; close(): Promise<void> };

  function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('APPHOST_')) env[k] = v;
    const child: ChildProcess = spawn(
      process.execPath,
      [MAIN, ...args, '--base-url', baseUrl.url, '--project', project],
      {
        cwd: app,
        // The token as CI passes it: the environment, not the command line.
        env: { ...env, APPHOST_CONFIG: join(dir, 'cli-config.json'), APPHOST_TOKEN: saToken },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`apphost ${args.join(' ')}: not done within ${DEPLOY_MS} ms\n${stdout}\n${stderr}`));
      }, DEPLOY_MS);
      child.once('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
  }

  const writeMain = (v: number) =>
    writeFileSync(
      join(app, 'main.py'),
      `import greetlib\n\n\ndef run(name: str = "world") -> dict:\n    return {"message": greetlib.greet(name), "version": ${v}}\n`,
    );
  // pip runs in the build Job with no package index: the wheel travels in the bundle.
  const REQS = '--no-index\n--find-links wheels\ngreetlib==1.0.0\n';

  beforeAll(async () => {
    kc = clusterKubeConfig();
    project = await createProject(kc);
    saToken = await serviceAccountToken(project);
    token = await runToken(project, saToken);
    baseUrl = await forwardToManagement();
    dir = mkdtempSync(join(tmpdir(), 'apphost-cluster-deploy-'));
    const wheel = makeWheel(
      PYTHON,
      join(dir, 'wheels'),
      'greetlib',
      '1.0.0',
      'def greet(n):\n    return f"greetings, {n}"\n',
    );
    app = join(dir, 'shop');
    mkdirSync(join(app, 'wheels'), { recursive: true });
    copyFileSync(wheel, join(app, 'wheels', 'greetlib-1.0.0-py3-none-any.whl'));
    writeFileSync(join(app, 'apphost.toml'), '[app]\nname = "shop"\n');
    writeFileSync(join(app, 'requirements.txt'), REQS);
  });

  afterAll(async () => {
    await baseUrl?.close();
    if (project) await kubectl('delete', 'namespace', project, '--wait=false').catch(() => {});
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it(
    'deploy: the dependencies build in a Job, the init container fetches them, the call answers',
    async () => {
      writeMain(1);
      const started = Date.now();
      const r = await cli(['deploy']);
      expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
      const buildId = /^deployed shop: build ([a-z0-9]+) is ready$/.exec(lastLine(r.stdout))?.[1];
      expect(buildId, r.stdout).toBeDefined();
      // The run URL is the ingress's api host (the chart hands it to the management API).
      expect(r.stdout).toContain(`url:  http://api.apphost.test/v4/${project}/shop`);
      // The build log streamed to the CLI: a Job in the project's namespace, pip in the runtime image.
      expect(r.stderr).toContain(`build job ${project}/apphost-build-${buildId} created`);
      expect(r.stderr).toMatch(/Successfully installed greetlib-1\.0\.0/);
      const body = await firstOk(token, `/v4/${project}/shop/run`, { name: 'cluster' });
      const firstOkMs = Date.now() - started;
      expect(JSON.parse(body)).toEqual({ message: 'greetings, cluster', version: 1 });
      process.stderr.write(`cluster deploy: apphost deploy → first 200 in ${firstOkMs} ms\n`);

      expect(
        await kubectl(
          '-n',
          project,
          'get',
          'job',
          `apphost-build-${buildId}`,
          '-o',
          'jsonpath={.status.succeeded}',
        ),
      ).toBe('1');
      // The App names the bundle and the set; its pod's init container fetched and checked both.
      const appObj = JSON.parse(await kubectl('-n', project, 'get', 'app', 'shop', '-o', 'json'));
      expect(appObj.spec.code.artifacts).toMatchObject({
        bundle: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
        dependencies: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
      });
      const pods = await kc
        .makeApiClient(CoreV1Api)
        .listNamespacedPod({ namespace: project, labelSelector: 'apphost.dev/app=shop' });
      const pod = pods.items.find((p) => p.status?.phase === 'Running');
      expect(pod?.status?.initContainerStatuses?.[0]).toMatchObject({
        name: 'fetch-code',
        state: { terminated: { exitCode: 0 } },
      });
      const fetched = await kubectl('-n', project, 'logs', pod?.metadata?.name ?? '', '-c', 'fetch-code');
      expect(fetched).toContain(`bundle ${appObj.spec.code.artifacts.bundle}`);
      expect(fetched).toContain(`dependency set ${appObj.spec.code.artifacts.dependencies}`);
    },
    CASE_MS,
  );

  it(
    'a change rolls out under load with no failed call, the dependency set reused',
    async () => {
      writeMain(2);
      const statuses: number[] = [];
      const versions: number[] = [];
      let calling = true;
      const caller = (async () => {
        while (calling) {
          const res = await call(token, `/v4/${project}/shop/run`, {}).catch(() => undefined);
          const text = (await res?.body.text()) ?? '';
          statuses.push(res?.statusCode ?? 0);
          if (res?.statusCode === 200) versions.push((JSON.parse(text) as { version: number }).version);
        }
      })();
      const started = Date.now();
      const r = await cli(['deploy']);
      const deployMs = Date.now() - started;
      // Keep calling a little after the CLI says ready, while old pods drain.
      const after = statuses.length;
      while (statuses.length < after + 20) await new Promise((res) => setTimeout(res, 50));
      calling = false;
      await caller;
      const failed = statuses.filter((s) => s !== 200);
      process.stderr.write(
        `cluster deploy: rollout in ${deployMs} ms, ${statuses.length} calls during it, ${failed.length} not 200\n`,
      );
      expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
      expect(lastLine(r.stdout)).toMatch(/^deployed shop: build [a-z0-9]+ is ready$/);
      expect(r.stderr).toMatch(/reusing the set built before/);
      // Old pods serve until new ones are ready: no call failed while the Deployment rolled.
      expect(failed).toEqual([]);
      expect(versions[0]).toBe(1);
      expect(versions.at(-1)).toBe(2);
    },
    CASE_MS,
  );

  it(
    "a failed build reports pip's error; the version that served keeps serving",
    async () => {
      writeMain(3);
      writeFileSync(join(app, 'requirements.txt'), `${REQS}not-there==1.0\n`);
      const r = await cli(['deploy']);
      expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(1);
      expect(lastLine(r.stdout)).toMatch(/^failed shop: build [a-z0-9]+ pip_failed: /);
      expect(r.stderr).toMatch(/ERROR: .*not-there/);
      const res = await call(token, `/v4/${project}/shop/run`, {});
      expect(JSON.parse(await res.body.text())).toMatchObject({ version: 2 });
      const apps = await management(saToken, 'GET', `/v2/projects/${project}/apps/shop`);
      expect(apps.status, apps.text).toBe(200);
    },
    CASE_MS,
  );
});
