import { describe, expect, it } from 'vitest';
import type { Deployment } from '../../shared/kube/objects.ts';
import { AppReason, deploymentReadiness, sameReconciledStatus } from './status.ts';

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

  it('an App scaled to zero is Ready (the next call starts a replica), with the reason saying so', () => {
    expect(deploymentReadiness(deployment(0))).toMatchObject({
      status: 'True',
      reason: AppReason.ScaledToZero,
    });
  });
});

describe('sameReconciledStatus', () => {
  it('ignores the fields only the autoscaler writes', () => {
    const own = { observedGeneration: 1, readyReplicas: 2 };
    expect(sameReconciledStatus({ ...own, desiredReplicas: 3, observedConcurrency: 1.5 }, own)).toBe(true);
    expect(sameReconciledStatus({ ...own, readyReplicas: 1, desiredReplicas: 3 }, own)).toBe(false);
  });
});
