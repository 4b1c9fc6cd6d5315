import { randomBytes } from 'node:crypto';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { inject } from 'vitest';
import { isUnsupported, type KubeAccess, kubeAccessFromKubeconfig } from '../../src/shared/kube/access.ts';

/** A KubeConfig for the shared test control plane. */
export function testKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(inject('kubeconfigYaml'));
  return kc;
}

/** The test control plane's access for the gateway's reader (src/shared/kube/reader.ts). */
export async function testKubeAccess(): Promise<KubeAccess> {
  const access = await kubeAccessFromKubeconfig(inject('kubeconfigYaml'), { source: 'test', dir: '.' });
  if (isUnsupported(access)) throw new Error(`test kubeconfig: ${access.unsupported}`);
  return access;
}

/** Creates a uniquely named namespace so tests sharing the control plane never see each other's objects. */
export async function createTestNamespace(
  kc: KubeConfig,
  prefix: string,
  labels: Record<string, string> = {},
): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`.slice(0, 63);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name, labels } } });
  return name;
}
