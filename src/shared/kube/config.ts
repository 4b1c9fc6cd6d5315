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
  try {
    if (file) kc.loadFromFile(file);
    else kc.loadFromDefault();
  } catch (err) {
    throw withoutExcerpt(err, file ?? 'default');
  }
  return reuseKubeConnections(kc);
}

/** A KubeConfig from kubeconfig YAML (tests, embedded clients), with the same connection reuse. */
export function kubeConfigFromString(yaml: string): KubeConfig {
  const kc = new KubeConfig();
  try {
    kc.loadFromString(yaml);
  } catch (err) {
    throw withoutExcerpt(err, '(string)');
  }
  return reuseKubeConnections(kc);
}

/**
 * A kubeconfig that is not YAML, told by position only: js-yaml's message quotes the lines around the
 * error, which may be a token or client-key-data, and a start error reaches the process's log.
 */
function withoutExcerpt(err: unknown, source: string): unknown {
  const e = err as { name?: unknown; reason?: unknown; mark?: { line?: number; column?: number } } | null;
  if (e?.name !== 'YAMLException') return err;
  const at =
    e.mark?.line === undefined ? '' : ` (line ${e.mark.line + 1}, column ${(e.mark.column ?? 0) + 1})`;
  return new Error(`kubeconfig ${source}: not YAML: ${String(e.reason)}${at}`);
}
