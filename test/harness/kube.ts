import { randomBytes } from 'node:crypto';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { inject } from 'vitest';

/** A KubeConfig for the shared test control plane. */
export function testKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(inject('kubeconfigYaml'));
  return kc;
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
