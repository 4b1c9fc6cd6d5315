/**
 * `apphost operator` as a real process: settings from the environment, ops endpoints, reconciling
 * while NATS is away and autoscaling once it comes up, and a graceful SIGTERM that hands the Lease back.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { KubeClient } from '../../../src/shared/kube/client.ts';
import { type Lease, Resources } from '../../../src/shared/kube/objects.ts';
import { createTestNamespace, testKubeConfig } from '../../harness/kube.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { freePort } from '../../harness/process.ts';
import { applyCrds, eventually, testClient } from './helpers.ts';

const kc = testKubeConfig();
let client: KubeClient;
let ns: string;
let child: ChildProcess | undefined;
let opsPort: number;
let output = '';
/** Down when the operator starts: it must reconcile without NATS and connect once it is up. */
let nats: NatsServer | undefined;

beforeAll(async () => {
  await applyCrds();
  client = testClient(kc);
  ns = await createTestNamespace(kc, 'op-main');
  opsPort = await freePort();
  nats = await startNats();
  await nats.stop({ keepStore: true });
  child = spawn(process.execPath, ['src/cli/main.ts', 'operator'], {
    env: {
      ...process.env,
      KUBECONFIG: inject('kubeconfigPath'),
      NATS_URL: nats.url,
      APPHOST_OPS_PORT: String(opsPort),
      APPHOST_LOG_LEVEL: 'info',
      APPHOST_OPERATOR_NAMESPACE: ns,
      APPHOST_OPERATOR_WATCH_NAMESPACE: ns,
      APPHOST_GATEWAY_NAMESPACE: ns,
      APPHOST_OPERATOR_IDENTITY: 'main-test',
      APPHOST_OPERATOR_LEASE_DURATION_MS: '3000',
      APPHOST_OPERATOR_RENEW_DEADLINE_MS: '2000',
      APPHOST_OPERATOR_RETRY_PERIOD_MS: '500',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (d) => {
    output += d;
  });
  child.stderr?.on('data', (d) => {
    output += d;
  });
});

afterAll(async () => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  await nats?.stop();
});

const ops = (path: string) => fetch(`http://127.0.0.1:${opsPort}${path}`);

describe('apphost operator (process)', () => {
  it('serves /healthz and /readyz, reconciles, exports metrics', async () => {
    await eventually('/readyz 200', async () => (await ops('/readyz')).status === 200);
    expect((await ops('/healthz')).status).toBe(200);
    await client.create(Resources.App, {
      apiVersion: 'apphost.dev/v1alpha1',
      kind: 'App',
      metadata: { name: 'proc', namespace: ns },
      spec: { runtime: 'cortex', image: 'example.invalid/proc:1' },
    });
    await eventually('Deployment from the process', async () =>
      Boolean(await client.get(Resources.Deployment, { namespace: ns, name: 'proc' })),
    );
    let metrics = '';
    await eventually('a successful reconcile counted', async () => {
      metrics = await (await ops('/metrics')).text();
      return /apphost_operator_reconciles_total\{controller="app",result="success"\} [1-9]/.test(metrics);
    });
    expect(metrics).toMatch(/apphost_operator_reconciles_total\{controller="app",result="success"\} [1-9]/);
    expect(metrics).toMatch(/apphost_operator_queue_depth\{controller="app"\}/);
    expect(metrics).toMatch(/apphost_operator_reconcile_duration_seconds_bucket/);
    expect(metrics).toMatch(/apphost_operator_leader 1/);
  });

  it('connects to NATS once it comes up and starts the autoscaler then', async () => {
    expect(output).not.toContain('autoscaler started');
    await nats?.restart();
    await eventually('autoscaler started', async () => output.includes('autoscaler started'));
  });

  it('exits cleanly on SIGTERM and hands the Lease back', async () => {
    const exited = new Promise<number | null>((resolve) => child?.once('exit', (code) => resolve(code)));
    child?.kill('SIGTERM');
    expect(await exited, output).toBe(0);
    const lease = await client.get<Lease>(Resources.Lease, { namespace: ns, name: 'apphost-operator' });
    expect(lease?.spec?.holderIdentity).toBe('');
  });
});
