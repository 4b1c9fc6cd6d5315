/**
 * The binaries as users run them: `apphost create-service-account` with a kubeconfig (bootstrap), then
 * `apphost management` (main.ts) on the real kube-apiserver and a private NATS, used with that token.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { runRotateRunTokenKeysCommand } from '../../../src/management/cli.ts';
import { createKubeStore } from '../../../src/management/store/kube.ts';
import { createRunTokenVerifier } from '../../../src/shared/run-tokens.ts';
import { applyProjectCrds } from '../../harness/crds.ts';
import { testKubeConfig } from '../../harness/kube.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { freePort, type ManagedProcess, startProcess, waitFor } from '../../harness/process.ts';
import { Browser } from '../dashboard/server.ts';
import { createNamespace, createProjectNamespace, deleteNamespaces, uniqueId } from './fixtures.ts';
import { call } from './server.ts';

const run = promisify(execFile);
const CLI = join(import.meta.dirname, '../../../src/cli/main.ts');
const haveKube = Boolean(inject('kubeconfigYaml'));

describe.skipIf(!haveKube)('apphost create-service-account + apphost management (main.ts)', () => {
  let kc: KubeConfig;
  let nats: NatsServer;
  let server: ManagedProcess | undefined;
  let dir: string;
  let project: string;
  let keysNs: string;
  let base: string;
  let opsBase: string;
  const namespaces: string[] = [];

  beforeAll(async () => {
    kc = testKubeConfig();
    await applyProjectCrds();
    dir = mkdtempSync(join(tmpdir(), 'mgmt-main-'));
    project = uniqueId('main');
    namespaces.push(await createProjectNamespace(kc, project));
    keysNs = uniqueId('mgmt-keys');
    await createNamespace(kc, keysNs);
    namespaces.push(keysNs);
    nats = await startNats();
  });
  afterAll(async () => {
    await server?.stop();
    await nats?.stop();
    if (kc) await deleteNamespaces(kc, namespaces);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('bootstraps a token with the CLI, serves with it, and shuts down on SIGTERM', async () => {
    const env = { ...process.env, APPHOST_RUN_TOKEN_KEYS_NAMESPACE: keysNs };
    const usage = await run(process.execPath, [CLI, 'create-service-account', '--name', 'ci'], { env }).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect((usage as { code: number }).code).toBe(2);
    expect((usage as { stderr: string }).stderr).toContain('--project');

    // Within the service-account lifetime cap (APPHOST_MANAGEMENT_MAX_SERVICE_ACCOUNT_DAYS, 366 by default).
    const expires = new Date(Date.now() + 300 * 86_400_000).toISOString().slice(0, 10);
    const created = await run(
      process.execPath,
      [
        CLI,
        'create-service-account',
        '--project',
        project,
        '--name',
        'ci',
        '--expires',
        expires,
        '--kubeconfig',
        inject('kubeconfigPath'),
      ],
      { env, timeout: 60_000 },
    );
    const out = JSON.parse(created.stdout) as { token: string; name: string; expires_at: string };
    expect(out).toMatchObject({ name: 'ci', expires_at: `${expires}T00:00:00.000Z` });
    expect(created.stderr).not.toContain(out.token);

    const [port, opsPort] = await Promise.all([freePort(), freePort()]);
    base = `http://127.0.0.1:${port}`;
    opsBase = `http://127.0.0.1:${opsPort}`;
    server = startProcess('management', process.execPath, [CLI, 'management'], {
      logFile: join(dir, 'management.log'),
      env: {
        ...env,
        KUBECONFIG: inject('kubeconfigPath'),
        NATS_URL: nats.url,
        APPHOST_MANAGEMENT_PORT: String(port),
        APPHOST_MANAGEMENT_HOST: '127.0.0.1',
        APPHOST_OPS_PORT: String(opsPort),
        // What the chart sets from ingress.api.host.
        APPHOST_DEPLOY_API_URL: 'https://api.example.test/',
      },
    });
    await waitFor('management /readyz', async () => (await fetch(`${opsBase}/readyz`)).ok, 60_000, 200);

    expect((await call(base, 'GET', `/v2/projects/${project}/domains`)).status).toBe(401);
    const domains = await call(base, 'GET', `/v2/projects/${project}/domains`, { token: out.token });
    expect(domains.status, domains.text).toBe(200);
    expect(domains.body).toEqual({ domains: [] });

    // The dashboard is served, and its curl lines name the public API URL the chart gives.
    const browser = new Browser(base);
    expect((await browser.signIn(out.token)).status).toBe(303);
    const runsPage = await browser.get('/dashboard/runs');
    expect(runsPage.status).toBe(200);
    expect(runsPage.text).toContain(`https://api.example.test/v4/${project}/`);

    const issued = await call(base, 'POST', `/v2/projects/${project}/run-tokens`, {
      token: out.token,
      body: { expires_at: new Date(Date.now() + 3_600_000).toISOString() },
    });
    expect(issued.status, issued.text).toBe(201);
    const runToken = (issued.body as { token: string }).token;

    // Rotate with the CLI function: the token signed by the previous key still verifies.
    const lines: string[] = [];
    const code = await runRotateRunTokenKeysCommand(
      ['--namespace', keysNs],
      { KUBECONFIG: inject('kubeconfigPath') },
      {
        out: (l) => lines.push(l),
        err: () => {},
      },
    );
    expect(code).toBe(0);
    const keys = await createKubeStore(kc, { keysNamespace: keysNs }).getRunTokenKeys();
    expect(keys.keys).toHaveLength(2);
    expect(JSON.parse(lines[0] ?? '{}')).toEqual({ kids: keys.keys.map((k) => k.kid) });
    expect((await createRunTokenVerifier(() => keys)(runToken)).projectId).toBe(project);

    const metrics = await (await fetch(`${opsBase}/metrics`)).text();
    expect(metrics).toContain('apphost_management_requests_total');

    const log = await import('node:fs/promises').then((fs) =>
      fs.readFile(join(dir, 'management.log'), 'utf8'),
    );
    expect(log).not.toContain(out.token.slice(-64));
    expect(log).not.toContain(runToken);

    // The harness runs the child under a watchdog shell (whose own exit code is 143 on TERM), so
    // the clean shutdown is read from the service's log.
    const exited = new Promise<void>((resolve) => server?.child.once('exit', () => resolve()));
    server.child.kill('SIGTERM');
    await exited;
    const finalLog = await import('node:fs/promises').then((fs) =>
      fs.readFile(join(dir, 'management.log'), 'utf8'),
    );
    expect(finalLog).toContain('"msg":"stopped"');
    expect(finalLog).not.toContain('shutdown step failed');
    server = undefined;
  });
});
