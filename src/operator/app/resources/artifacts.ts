/**
 * An App deployed by `apphost deploy` (spec.code.artifacts): its pods get the bundle and the dependency
 * set from the artifact store through an init container of the platform image, which checks both
 * against their sha256 and unpacks them into emptyDir volumes the runtime mounts read-only. The digests
 * are in the pod template, so a new version is a new template and Kubernetes rolls it out.
 */
import type { V1Container, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import type { App } from '../../../apis/v1alpha1/types.ts';

export const FETCH_CONTAINER_NAME = 'fetch-code';
export const DEPS_VOLUME = 'deps';
export const DEPS_DIR = '/deps';
/**
 * Where the init container writes: not /app, which is the platform image's own folder (a volume there
 * would hide its program).
 */
const FETCH_APP_DIR = '/fetch/app';
const FETCH_DEPS_DIR = '/fetch/deps';

export interface ArtifactFetchSettings {
  /** The platform image (it has `apphost fetch-artifacts`). */
  platformImage: string;
  /** Where the artifact store's NATS server is. */
  natsUrl: string;
}

export interface ArtifactPodParts {
  initContainer: V1Container;
  volumes: V1Volume[];
  /** Mounts of the app container (read-only). */
  mounts: V1VolumeMount[];
  /** Extra runtime arguments. */
  runtimeArgs: string[];
}

/** The pod parts that fetch an App's artifacts into `appDir` (and /deps); undefined when it has none. */
export function artifactPodParts(
  app: App,
  s: ArtifactFetchSettings,
  codeVolume: string,
  appDir: string,
): ArtifactPodParts | undefined {
  const a = app.spec.code?.artifacts;
  if (!a) return undefined;
  const deps = a.dependencies;
  return {
    initContainer: {
      name: FETCH_CONTAINER_NAME,
      image: s.platformImage,
      args: [
        'fetch-artifacts',
        '--bundle',
        a.bundle,
        '--into',
        FETCH_APP_DIR,
        ...(deps ? ['--dependencies', deps, '--dependencies-into', FETCH_DEPS_DIR] : []),
      ],
      env: [{ name: 'NATS_URL', value: s.natsUrl }],
      volumeMounts: [
        { name: codeVolume, mountPath: FETCH_APP_DIR },
        ...(deps ? [{ name: DEPS_VOLUME, mountPath: FETCH_DEPS_DIR }] : []),
      ],
    },
    volumes: [{ name: codeVolume, emptyDir: {} }, ...(deps ? [{ name: DEPS_VOLUME, emptyDir: {} }] : [])],
    mounts: [
      { name: codeVolume, mountPath: appDir, readOnly: true },
      ...(deps ? [{ name: DEPS_VOLUME, mountPath: DEPS_DIR, readOnly: true }] : []),
    ],
    runtimeArgs: deps ? ['--deps-dir', DEPS_DIR] : [],
  };
}
