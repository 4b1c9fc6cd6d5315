/** `apphost ensure-platform-key` (the plain-YAML install's Job) against the real API server. */
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestNamespace, testKubeConfig } from '../../harness/kube.ts';
import { REPO, run } from './helpers.ts';

describe('apphost ensure-platform-key', () => {
  const kc = testKubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  let namespace: string;
  beforeAll(async () => {
    namespace = await createTestNamespace(kc, 'pkey');
  });
  afterAll(async () => {
    await core.deleteNamespace({ name: namespace }).catch(() => {});
  });

  const ensure = () =>
    run(process.execPath, [
      `${REPO}/src/cli/main.ts`,
      'ensure-platform-key',
      '--namespace',
      namespace,
      '--kubeconfig',
      inject('kubeconfigPath'),
    ]);
  const key = async () =>
    Buffer.from(
      (await core.readNamespacedSecret({ namespace, name: 'apphost-platform-key' })).data?.['platform-key'] ??
        '',
      'base64',
    ).toString();

  it('creates the Secret once and leaves it unchanged afterwards', async () => {
    const first = await ensure();
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain(`created Secret ${namespace}/apphost-platform-key`);
    const value = await key();
    expect(value).toMatch(/^[A-Za-z0-9_-]{48}$/);
    const second = await ensure();
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain('exists; left unchanged');
    expect(await key()).toBe(value);
  });

  it('fails with a clear message when the API refuses', async () => {
    const r = await run(process.execPath, [
      `${REPO}/src/cli/main.ts`,
      'ensure-platform-key',
      '--namespace',
      'no-such-namespace-here',
      '--kubeconfig',
      inject('kubeconfigPath'),
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/cannot create Secret no-such-namespace-here\/apphost-platform-key/);
  });
});
