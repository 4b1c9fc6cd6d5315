/**
 * The dependency build seam: turn an app's requirements into a dependency set (a `pip install --target`
 * folder, packed and stored by sha256). A subprocess in local mode (local-builder.ts), a Kubernetes Job
 * in a cluster (job-builder.ts). Both constrain pip with the runtime's own pins, so a user package cannot
 * break the runtime, and both report pip's own error when it fails.
 */
import type { Sha256Digest } from '../apis/v1alpha1/types.ts';
import type { ArchiveLimits } from './archive.ts';
import { MiB } from './bundle.ts';
import type { BuildTarget, Requirements } from './requirements.ts';

export interface DependencyBuildRequest {
  buildId: string;
  projectId: string;
  appName: string;
  bundle: Sha256Digest;
  requirements: Requirements;
  /** The folder of the requirements file in the bundle ('' = root): pip reads its relative options from there. */
  requirementsDir: string;
  /** dependencyKey(): the set is recorded under it. */
  key: string;
}

export const BuildFailure = {
  /** pip said no: the message is pip's. */
  PipFailed: 'pip_failed',
  Timeout: 'timeout',
  TooLarge: 'too_large',
  /** The build could not run (a platform fault, not the app's). */
  Infrastructure: 'infrastructure',
} as const;
export type BuildFailure = (typeof BuildFailure)[keyof typeof BuildFailure];

export type DependencyBuildResult =
  | { ok: true; digest: Sha256Digest; files?: number; unpackedBytes?: number }
  | { ok: false; failure: BuildFailure; message: string };

export interface DependencyBuilder {
  /** What this builder's sets are for: part of every dependency key. */
  target(): Promise<BuildTarget>;
  build(
    req: DependencyBuildRequest,
    log: (line: string) => void,
    signal: AbortSignal,
  ): Promise<DependencyBuildResult>;
}

/** Bounds of a packed dependency set (pip --target folders of big packages are large). */
export const DEFAULT_DEPENDENCY_LIMITS: ArchiveLimits = {
  maxBytes: 512 * MiB,
  maxUnpackedBytes: 2048 * MiB,
  maxFiles: 200_000,
};

/** Name of the assembled requirements file the build writes beside the app's own. */
export const BUILD_REQUIREMENTS_FILE = '.apphost-requirements.txt';

/** The pip command line of every build (the same in a subprocess and in a Job). */
export function pipArgs(target: string, constraints: string, requirements: string): string[] {
  return [
    '-m',
    'pip',
    'install',
    '--target',
    target,
    '--no-input',
    '--disable-pip-version-check',
    '--no-warn-script-location',
    '--progress-bar',
    'off',
    '--constraint',
    constraints,
    '--requirement',
    requirements,
  ];
}

/** The message of a failed pip run: its ERROR lines (and the cause of a conflict), else its last line. */
export function pipError(tail: readonly string[], code: number | null): string {
  const errors = tail.filter((l) => /^\s*ERROR:/.test(l));
  const cause = tail.findIndex((l) => /The conflict is caused by:/.test(l));
  if (cause !== -1)
    for (const l of tail.slice(cause + 1)) {
      if (!/^\s+\S/.test(l)) break;
      errors.push(l.trim());
    }
  const why = errors.length ? errors.join('\n') : (tail.at(-1) ?? '');
  return `pip install failed (exit code ${code ?? 'none'})${why ? `: ${why.trim()}` : ''}`;
}
