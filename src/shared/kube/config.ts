/**
 * The one way a process gets its KubeConfig: the file named by the piece's KUBECONFIG setting (the
 * first of a `:`-separated list), else the default chain (~/.kube/config, then the in-cluster service
 * account). Every KubeConfig it returns reuses its connections (connection.ts), whichever client
 * (client-node's typed APIs, its informers, or our KubeClient) uses it.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { reuseKubeConnections } from './connection.ts';

export function loadKubeConfig(kubeconfig?: string): KubeConfig {
  const kc = new KubeConfig();
  const file = kubeconfig?.split(':').find((p) => p !== '');
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  return reuseKubeConnections(kc);
}

/** A KubeConfig from kubeconfig YAML (tests, embedded clients), with the same connection reuse. */
export function kubeConfigFromString(yaml: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(yaml);
  return reuseKubeConnections(kc);
}
