/**
 * One control plane and one NATS server per test run, shared by every test file through
 * vitest's provide/inject. Tests isolate themselves with their own namespaces, streams and ports.
 */
import type { TestProject } from 'vitest/node';
import { startControlPlane } from './controlplane.ts';
import { startNats } from './nats.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    kubeconfigYaml: string;
    kubeconfigPath: string;
    kubeServer: string;
    kubeToken: string;
    /** PEM files of an admin client certificate (controlplane.ts). */
    kubeClientCert: { certFile: string; keyFile: string };
    natsUrl: string;
  }
}

export default async function setup(project: TestProject) {
  // Developer convenience only (never set in CI): iterate on NATS-only suites without the control plane.
  const skipKube = process.env.APPHOST_TEST_SKIP_CONTROL_PLANE === '1' && !process.env.CI;
  const [cp, nats] = await Promise.all([
    skipKube ? undefined : startControlPlane({ controllerManager: true }),
    startNats(),
  ]);
  if (cp) {
    project.provide('kubeconfigYaml', cp.kubeconfigYaml);
    project.provide('kubeconfigPath', cp.kubeconfigPath);
    project.provide('kubeServer', cp.server);
    project.provide('kubeToken', cp.token);
    project.provide('kubeClientCert', cp.clientCert);
  }
  project.provide('natsUrl', nats.url);
  return async () => {
    await Promise.all([cp?.stop(), nats.stop()]);
  };
}
