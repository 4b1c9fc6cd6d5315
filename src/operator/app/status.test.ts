import { describe, expect, it } from 'vitest';
import type { Deployment } from '../runtime/kube-client.ts';
import { AppReason, deploymentReadiness } from './status.ts';

const deployment = (replicas: number): Deployment =>
  ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'hello', namespace: 'p1', generation: 2 },
    spec: { replicas },
    status: {
      observedGeneration: 2,
      replicas,
      updatedReplicas: replicas,
      readyReplicas: replicas,
      availableReplicas: replicas,
    },
  }) as Deployment;

describe('deploymentReadiness', () => {
  it('is Ready once every wanted replica is ready', () => {
    expect(deploymentReadiness(deployment(2))).toMatchObject({ status: 'True', reason: AppReason.Ready });
  });

  it('an App with minReplicas 0 runs no replica and is not ready', () => {
    expect(deploymentReadiness(deployment(0))).toMatchObject({
      status: 'False',
      reason: AppReason.ScaledToZero,
    });
  });
});
