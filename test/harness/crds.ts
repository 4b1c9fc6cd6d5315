/**
 * The project's CRDs (crds/) on the shared test control plane, applied once per caller and waited on
 * until they are served. Test files apply them concurrently, so server-side apply: one PATCH each,
 * no read-then-create race.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { inject } from 'vitest';
import { APP_PLURAL, DOMAIN_ASSIGNMENT_PLURAL, GROUP, VERSION } from '../../src/apis/v1alpha1/types.ts';
import { binaryPath } from './binaries.ts';
import { testKubeConfig } from './kube.ts';
import { waitFor } from './process.ts';

const exec = promisify(execFile);
const CRDS_DIR = join(import.meta.dirname, '..', '..', 'crds');
/** Generous: two cores shared by every suite of the run. */
export const CRDS_READY_TIMEOUT_MS = 60_000;

export async function applyProjectCrds(): Promise<void> {
  const kubectl = (...args: string[]) =>
    exec(binaryPath('kubectl'), ['--kubeconfig', inject('kubeconfigPath'), ...args]);
  await waitFor(
    'kubectl apply -f crds/',
    async () => {
      await kubectl(
        'apply',
        '--server-side',
        '--force-conflicts',
        '--field-manager=apphost-tests',
        '-f',
        CRDS_DIR,
      );
      return true;
    },
    CRDS_READY_TIMEOUT_MS,
    500,
  );
  await kubectl(
    'wait',
    '--for=condition=Established',
    `--timeout=${CRDS_READY_TIMEOUT_MS / 1000}s`,
    `crd/${APP_PLURAL}.${GROUP}`,
    `crd/${DOMAIN_ASSIGNMENT_PLURAL}.${GROUP}`,
  );
  // Established is not yet servable: the apiserver answers 429 while the new storage initialises.
  const custom = testKubeConfig().makeApiClient(CustomObjectsApi);
  for (const plural of [APP_PLURAL, DOMAIN_ASSIGNMENT_PLURAL]) {
    await waitFor(
      `${plural}.${GROUP} served`,
      async () => {
        await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural });
        return true;
      },
      CRDS_READY_TIMEOUT_MS,
      200,
    );
  }
}
