/**
 * Issue 21.1–21.2: the bundled NATS on a bare cluster's volumes. A hostPath PersistentVolume (root-owned,
 * as the kubelet creates it) through `storage.type=existingClaim`: without help, NATS (uid 10001) cannot
 * create its JetStream directory; with `storage.prepareOwnership=true` it starts and is ready. Installed
 * alone (no platform pieces) in its own namespace, so the shared install is untouched.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../harness/process.ts';
import { helm, info, kubectl, kubectlApply, uniqueName } from './fixture.ts';
import { builtImages } from './node.ts';
import { CHART } from './platform.ts';

/** Bound on the NATS pod reaching the state a case expects. */
const NATS_TIMEOUT_MS = 120_000;

describe('bundled NATS on a hostPath volume', () => {
  const namespace = uniqueName('nats-hostpath');
  const release = 'natsonly';
  const pv = `${namespace}-pv`;

  afterAll(async () => {
    await helm(['uninstall', release, '--namespace', namespace, '--wait']).catch(() => {});
    await kubectl('delete', 'namespace', namespace, '--wait=false').catch(() => {});
    await kubectl('delete', 'pv', pv, '--wait=false').catch(() => {});
  });

  const install = (extra: string[]) => {
    const nats = builtImages().nats?.ref as string;
    return helm(
      [
        'install',
        release,
        CHART,
        '--namespace',
        namespace,
        ...[
          'operator.enabled=false',
          'gateway.enabled=false',
          'webhooks.enabled=false',
          'management.enabled=false',
          'nats.bundled.replicas=1',
          'nats.bundled.storage.type=existingClaim',
          'nats.bundled.storage.existingClaim=nats-data',
          `nats.bundled.image.repository=${nats.slice(0, nats.lastIndexOf(':'))}`,
          `nats.bundled.image.tag=${nats.slice(nats.lastIndexOf(':') + 1)}`,
          ...extra,
        ].flatMap((v) => ['--set', v]),
      ],
      NATS_TIMEOUT_MS,
    );
  };

  it('starts JetStream on a root-owned hostPath volume once prepareOwnership chowns it', {
    timeout: NATS_TIMEOUT_MS * 3,
  }, async () => {
    await kubectl('create', 'namespace', namespace);
    await kubectlApply(
      namespace,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [
          {
            apiVersion: 'v1',
            kind: 'PersistentVolume',
            metadata: { name: pv },
            spec: {
              capacity: { storage: '1Gi' },
              accessModes: ['ReadWriteOnce'],
              storageClassName: '',
              persistentVolumeReclaimPolicy: 'Delete',
              hostPath: { path: `${info().root}/pv/${pv}`, type: 'DirectoryOrCreate' },
            },
          },
          {
            apiVersion: 'v1',
            kind: 'PersistentVolumeClaim',
            metadata: { name: 'nats-data' },
            spec: {
              accessModes: ['ReadWriteOnce'],
              storageClassName: '',
              volumeName: pv,
              resources: { requests: { storage: '1Gi' } },
            },
          },
        ],
      }),
    );

    // Without: the server cannot make its store (what a platform team saw, issue 21.2).
    await install([]);
    let logs = '';
    await waitFor(
      'NATS failing on the root-owned volume',
      async () => {
        logs = await kubectl('-n', namespace, 'logs', 'natsonly-apphost-nats-0').catch(() => '');
        return /permission denied/.test(logs);
      },
      NATS_TIMEOUT_MS,
      1000,
    );
    await helm(['uninstall', release, '--namespace', namespace, '--wait']);

    // With: ready, JetStream enabled (the readiness probe asks /healthz?js-enabled-only=true).
    await install(['nats.bundled.storage.prepareOwnership=true']);
    // Polled rather than `kubectl wait`, which fails at once while the StatefulSet has not made the pod yet.
    await waitFor(
      'NATS Ready on the prepared volume',
      async () =>
        (
          await kubectl(
            '-n',
            namespace,
            'get',
            'pod',
            'natsonly-apphost-nats-0',
            '-o',
            'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
          ).catch(() => '')
        ).trim() === 'True',
      NATS_TIMEOUT_MS,
      1000,
    );
    logs = await kubectl('-n', namespace, 'logs', 'natsonly-apphost-nats-0');
    expect(logs).not.toMatch(/permission denied/);
  });
});
