/** Shared pieces of the operator's integration tests: CRDs via kubectl, a test operator, polling. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { KubeConfig } from '@kubernetes/client-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { inject } from 'vitest';
import { createOperator, type Operator } from '../../../src/operator/operator.ts';
import type { LeaderElectionSettings } from '../../../src/operator/runtime/leader-election.ts';
import { defaultOperatorSettings, type OperatorSettings } from '../../../src/operator/settings.ts';
import { createKubeClient, type KubeClient } from '../../../src/shared/kube/client.ts';
import { Resources, type Service } from '../../../src/shared/kube/objects.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { binaryPath } from '../../harness/binaries.ts';
import { waitFor } from '../../harness/process.ts';

const exec = promisify(execFile);

/** Generous: two cores shared by every suite of the run. */
export const CONVERGE_MS = 45_000;

export async function kubectl(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  return exec(binaryPath('kubectl'), ['--kubeconfig', inject('kubeconfigPath'), ...args]);
}

/** The project's CRDs on the shared control plane (see test/harness/crds.ts). */
export { applyProjectCrds as applyCrds } from '../../harness/crds.ts';

export function testClient(kc: KubeConfig): KubeClient {
  return createKubeClient(kc, {
    fieldManager: 'apphost-test',
    requestTimeoutMs: 30_000,
    watchIdleTimeoutMs: 120_000,
  });
}

export interface TestOperator {
  operator: Operator;
  registry: Registry;
  settings: OperatorSettings;
  /** Writes this instance sent, leases excluded (renewing the Lease is how a leader stays leader). */
  writes(): Promise<number>;
}

/** An operator scoped to one namespace with short timings (lease ~3 s, resync 2 s). */
export function testOperator(
  kc: KubeConfig,
  namespace: string,
  overrides: Partial<Omit<OperatorSettings, 'leaderElection'>> & {
    leaderElection?: Partial<LeaderElectionSettings>;
  } = {},
  identity = `test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
  /** With NATS, the operator runs its autoscaler. */
  nc?: NatsConnection,
): TestOperator {
  const base = defaultOperatorSettings();
  const settings = defaultOperatorSettings({
    watchNamespace: namespace,
    gatewayNamespace: namespace,
    runtimeImage: 'example.invalid/runtime-python:test',
    resyncPeriodMs: 2_000,
    watchTimeoutSeconds: 30,
    backoff: { baseDelayMs: 100, maxDelayMs: 2_000 },
    workers: 2,
    ...overrides,
    leaderElection: {
      ...base.leaderElection,
      namespace,
      identity,
      leaseDurationMs: 3_000,
      renewDeadlineMs: 2_000,
      retryPeriodMs: 500,
      ...overrides.leaderElection,
    },
  });
  const registry = new Registry();
  const log = createLogger({
    name: `operator-${identity}`,
    level: process.env.APPHOST_TEST_LOG_LEVEL ?? 'warn',
  });
  const operator = createOperator({ kc, log, registry, settings, ...(nc ? { nc } : {}) });
  return {
    operator,
    registry,
    settings,
    async writes() {
      const m = await registry.getSingleMetric('apphost_operator_kube_writes_total')?.get();
      return (m?.values ?? [])
        .filter((v) => v.labels.resource !== 'leases')
        .reduce((sum, v) => sum + v.value, 0);
    },
  };
}

export async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = CONVERGE_MS) {
  await waitFor(what, check, timeoutMs, 200);
}

/**
 * Stands in for a kubelet (the test control plane has no node): writes `status` onto every pod of
 * the App, once the ReplicaSet has created them. Answers false while there is no pod yet.
 */
export async function setPodsStatus(
  client: KubeClient,
  namespace: string,
  appName: string,
  status: (now: string) => Record<string, unknown>,
): Promise<boolean> {
  const pods = await client.list(Resources.Pod, { namespace, labelSelector: `apphost.dev/app=${appName}` });
  if (pods.items.length === 0) return false;
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  for (const pod of pods.items) {
    await client.mergePatch(
      Resources.Pod,
      { namespace, name: pod.metadata.name },
      { status: status(now) },
      'status',
    );
  }
  return true;
}

/** Reconciles of Apps this operator has run (any result). */
export async function reconcileCount(o: TestOperator): Promise<number> {
  const m = await o.registry.getSingleMetric('apphost_operator_reconciles_total')?.get();
  return (m?.values ?? []).filter((v) => v.labels.controller === 'app').reduce((s, v) => s + v.value, 0);
}

/** A stand-in gateway Service (domain Ingresses route to it and are owned by it). */
export async function createGatewayService(client: KubeClient, namespace: string, name: string) {
  return client.create<Service>(Resources.Service, {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace },
    spec: { selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] },
  });
}
