import type { V1ContainerStatus, V1PodCondition } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { AppReadyReason } from '../../apis/v1alpha1/app-reasons.ts';
import type { Condition } from '../../apis/v1alpha1/types.ts';
import type { Pod } from '../../shared/kube/objects.ts';
import { slimPod } from './controller.ts';
import { MAX_TERMINATION_MESSAGE_CHARS, podFailureCause } from './pod-causes.ts';

const IMAGE = 'registry.example/team/hello:1';

function pod(
  name: string,
  opts: {
    containers?: Partial<V1ContainerStatus>[];
    init?: Partial<V1ContainerStatus>[];
    conditions?: Partial<V1PodCondition>[];
    phase?: string;
    deleting?: boolean;
  } = {},
): Pod {
  const status = (c: Partial<V1ContainerStatus>) =>
    ({ name: 'app', image: IMAGE, ready: false, restartCount: 0, imageID: '', ...c }) as V1ContainerStatus;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'p1',
      labels: { 'apphost.dev/app': 'hello' },
      ...(opts.deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
    },
    spec: {
      containers: [{ name: 'app', image: IMAGE }],
      ...(opts.init ? { initContainers: [{ name: 'fetch-code', image: 'apphost:1' }] } : {}),
    },
    status: {
      phase: opts.phase ?? 'Pending',
      conditions: opts.conditions as V1PodCondition[] | undefined,
      containerStatuses: (opts.containers ?? []).map(status),
      ...(opts.init
        ? { initContainerStatuses: opts.init.map((c) => status({ name: 'fetch-code', ...c })) }
        : {}),
    },
  };
}

const waiting = (reason: string, message?: string): Partial<V1ContainerStatus> => ({
  state: { waiting: { reason, ...(message ? { message } : {}) } },
});
const SYNTAX =
  'cannot import /app/main.py:\n  File "/app/main.py", line 3\n    def f(:\n          ^\nSyntaxError: invalid syntax';
const crashed = (exitCode: number, message?: string, reason = 'Error') => ({ exitCode, reason, message });

describe('podFailureCause', () => {
  it.each<[string, Pod[], { reason: string; message: string | RegExp } | undefined]>([
    ['no pods: nothing to say (the Deployment speaks)', [], undefined],
    ['a pod still starting', [pod('a', { containers: [waiting('ContainerCreating')] })], undefined],
    [
      'a pod running and ready',
      [pod('a', { phase: 'Running', containers: [{ ready: true, state: { running: {} } }] })],
      undefined,
    ],
    [
      'ErrImagePull names the image and the registry error',
      [pod('a', { containers: [waiting('ErrImagePull', 'failed to pull and unpack image: not found')] })],
      {
        reason: AppReadyReason.ImagePullFailed,
        message: `image "${IMAGE}" cannot be pulled: failed to pull and unpack image: not found`,
      },
    ],
    [
      'ImagePullBackOff without an earlier error still names the image',
      [pod('a', { containers: [waiting('ImagePullBackOff', `Back-off pulling image "${IMAGE}"`)] })],
      {
        reason: AppReadyReason.ImagePullFailed,
        message: `image "${IMAGE}" cannot be pulled: Back-off pulling image "${IMAGE}"`,
      },
    ],
    [
      'InvalidImageName is an image problem',
      [pod('a', { containers: [waiting('InvalidImageName', 'couldn\'t parse image name "Bad:Name"')] })],
      { reason: AppReadyReason.ImagePullFailed, message: /cannot be pulled: couldn't parse image name/ },
    ],
    [
      'a crash loop carries the exit code and the termination message (the runtime writes the import error)',
      [
        pod('a', {
          phase: 'Running',
          containers: [
            {
              ...waiting('CrashLoopBackOff', 'back-off 10s restarting failed container'),
              restartCount: 2,
              lastState: { terminated: crashed(1, SYNTAX) },
            },
          ],
        }),
      ],
      { reason: AppReadyReason.CrashLoopBackOff, message: `container "app" exited with code 1: ${SYNTAX}` },
    ],
    [
      'the first exit, before any back-off, is already a crash',
      [pod('a', { phase: 'Running', containers: [{ state: { terminated: crashed(1, SYNTAX) } }] })],
      { reason: AppReadyReason.CrashLoopBackOff, message: `container "app" exited with code 1: ${SYNTAX}` },
    ],
    [
      'restarted and not ready yet after a crash: still the crash (no flapping to "starting")',
      [
        pod('a', {
          phase: 'Running',
          containers: [
            { state: { running: {} }, restartCount: 3, lastState: { terminated: crashed(1, SYNTAX) } },
          ],
        }),
      ],
      { reason: AppReadyReason.CrashLoopBackOff, message: `container "app" exited with code 1: ${SYNTAX}` },
    ],
    [
      'an OOM kill names it; no message points at the log',
      [
        pod('a', {
          phase: 'Running',
          containers: [
            {
              ...waiting('CrashLoopBackOff'),
              lastState: { terminated: crashed(137, undefined, 'OOMKilled') },
            },
          ],
        }),
      ],
      {
        reason: AppReadyReason.CrashLoopBackOff,
        message:
          'container "app" exited with code 137 (OOMKilled); its log says why (kubectl logs --previous)',
      },
    ],
    [
      'a ready container that crashed long ago is no cause',
      [
        pod('a', {
          phase: 'Running',
          containers: [{ ready: true, state: { running: {} }, lastState: { terminated: crashed(1, 'x') } }],
        }),
      ],
      undefined,
    ],
    [
      'a clean exit (code 0) is no crash',
      [pod('a', { phase: 'Running', containers: [{ state: { terminated: crashed(0, '', 'Completed') } }] })],
      undefined,
    ],
    [
      'a missing Secret key',
      [pod('a', { containers: [waiting('CreateContainerConfigError', 'secret "db" not found')] })],
      {
        reason: AppReadyReason.ContainerConfigError,
        message: 'container "app" cannot be created: secret "db" not found',
      },
    ],
    [
      'a root image under runAsNonRoot',
      [
        pod('a', {
          containers: [
            waiting('CreateContainerConfigError', 'container has runAsNonRoot and image will run as root'),
          ],
        }),
      ],
      { reason: AppReadyReason.ContainerConfigError, message: /runAsNonRoot and image will run as root/ },
    ],
    [
      'unschedulable, with the scheduler message',
      [
        pod('a', {
          conditions: [
            {
              type: 'PodScheduled',
              status: 'False',
              reason: 'Unschedulable',
              message: '0/1 nodes are available: 1 Insufficient memory.',
            },
          ],
        }),
      ],
      {
        reason: AppReadyReason.Unschedulable,
        message: "no node can run the App's pods: 0/1 nodes are available: 1 Insufficient memory.",
      },
    ],
    [
      'a failing init container (e.g. fetching code) counts like the app container',
      [
        pod('a', {
          init: [
            {
              ...waiting('CrashLoopBackOff'),
              lastState: { terminated: crashed(2, 'bundle sha256:ab not found') },
            },
          ],
          containers: [waiting('PodInitializing')],
        }),
      ],
      {
        reason: AppReadyReason.CrashLoopBackOff,
        message: 'container "fetch-code" exited with code 2: bundle sha256:ab not found',
      },
    ],
    [
      'pods being deleted and finished (evicted) pods are not the current state',
      [
        pod('a', { deleting: true, containers: [waiting('ErrImagePull', 'gone')] }),
        pod('b', { phase: 'Failed', containers: [{ state: { terminated: crashed(137, '', 'Evicted') } }] }),
      ],
      undefined,
    ],
    [
      'several causes: the image comes first, whichever pod shows it',
      [
        pod('a', { phase: 'Running', containers: [{ state: { terminated: crashed(1, SYNTAX) } }] }),
        pod('b', { containers: [waiting('ErrImagePull', 'denied')] }),
      ],
      { reason: AppReadyReason.ImagePullFailed, message: `image "${IMAGE}" cannot be pulled: denied` },
    ],
  ])('%s', (_name, pods, want) => {
    const got = podFailureCause(pods);
    // The operator's pod cache keeps slimmed pods: they must tell the same story.
    expect(podFailureCause(pods.map(slimPod))).toEqual(got);
    if (!want) return expect(got).toBeUndefined();
    expect(got?.reason).toBe(want.reason);
    if (typeof want.message === 'string') expect(got?.message).toBe(want.message);
    else expect(got?.message).toMatch(want.message);
  });

  it('keeps the pull error through the kubelet back-off, so the status does not flap', () => {
    const first = podFailureCause([pod('a', { containers: [waiting('ErrImagePull', 'manifest unknown')] })]);
    const previous: Condition = { type: 'Ready', status: 'False', ...first };
    const backoff = [
      pod('a', { containers: [waiting('ImagePullBackOff', `Back-off pulling image "${IMAGE}"`)] }),
    ];
    expect(podFailureCause(backoff, previous)).toEqual(first);
    // A different image (the App was changed) is a new cause.
    const other = pod('a', { containers: [waiting('ImagePullBackOff', 'Back-off')] });
    other.spec!.containers[0]!.image = 'other:2';
    expect(podFailureCause([other], previous)?.message).toBe('image "other:2" cannot be pulled: Back-off');
  });

  it('keeps the tail of a long termination message, where the error is', () => {
    const long = `${'x'.repeat(5000)}\nSyntaxError: invalid syntax`;
    const got = podFailureCause([pod('a', { containers: [{ state: { terminated: crashed(1, long) } }] })]);
    expect(got?.message.endsWith('SyntaxError: invalid syntax')).toBe(true);
    expect(got?.message.length).toBeLessThan(MAX_TERMINATION_MESSAGE_CHARS + 60);
  });
});
