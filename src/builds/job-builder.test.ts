import { describe, expect, it } from 'vitest';
import {
  DEFAULT_JOB_BUILDER_SETTINGS,
  type JobBuilderSettings,
  jobName,
  makeBuildJob,
} from './job-builder.ts';

const settings: JobBuilderSettings = {
  ...DEFAULT_JOB_BUILDER_SETTINGS,
  runtimeImage: 'example.org/runtime:1',
  platformImage: 'example.org/apphost:1',
  natsUrl: 'nats://nats.apphost-system:4222',
};
const bundle = `sha256:${'a'.repeat(64)}`;
const requirements = `sha256:${'b'.repeat(64)}`;
const key = 'c'.repeat(64);
const job = (over: Partial<JobBuilderSettings> = {}, requirementsDir = '') =>
  makeBuildJob({ buildId: 'b1x', appName: 'shop', bundle, requirements, requirementsDir, key }, 'proj-ns', {
    ...settings,
    ...over,
  });

describe('makeBuildJob', () => {
  it('is named after the build, in the project namespace, labelled so the worker finds its pod again', () => {
    const j = job();
    expect(j.metadata).toMatchObject({
      name: jobName('b1x'),
      namespace: 'proj-ns',
      labels: { 'apphost.dev/build': 'b1x', 'apphost.dev/app': 'shop' },
    });
    expect(j.spec?.template.metadata?.labels).toEqual({ 'apphost.dev/build': 'b1x' });
  });

  it('runs once, bounded by the build timeout, and is removed by Kubernetes after its TTL', () => {
    const j = job({ buildTimeoutMs: 90_500, jobTtlSeconds: 120 });
    expect(j.spec).toMatchObject({
      backoffLimit: 0,
      activeDeadlineSeconds: 91,
      ttlSecondsAfterFinished: 120,
    });
    expect(j.spec?.template.spec?.restartPolicy).toBe('Never');
  });

  it('fetches with the platform image, runs pip in the runtime image with its constraints, publishes under the key', () => {
    const pod = job({}, 'deps').spec?.template.spec;
    const [fetch, pip] = pod?.initContainers ?? [];
    expect(fetch).toMatchObject({ name: 'fetch', image: 'example.org/apphost:1' });
    expect(fetch?.args).toEqual([
      'fetch-artifacts',
      '--bundle',
      bundle,
      '--into',
      '/work/src',
      '--file',
      // the requirements sit in the folder of the app's requirements file: relative paths resolve there
      `${requirements}:/work/src/deps/.apphost-requirements.txt`,
    ]);
    expect(pip).toMatchObject({ name: 'pip', image: 'example.org/runtime:1', workingDir: '/work/src' });
    expect(pip?.command?.[2]).toMatch(
      /^python -m apphost_runtime\.constraints > \/work\/constraints\.txt && exec python '-m' 'pip' 'install' '--target' '\/work\/deps'.*'--constraint' '\/work\/constraints\.txt'.*'--requirement' '\/work\/src\/deps\/\.apphost-requirements\.txt'/,
    );
    expect(pip?.resources).toEqual({ requests: { cpu: '1', memory: '1Gi' }, limits: { memory: '1Gi' } });
    expect(pod?.containers).toHaveLength(1);
    expect(pod?.containers[0]).toMatchObject({
      name: 'publish',
      image: 'example.org/apphost:1',
      args: ['publish-dependencies', '--dir', '/work/deps', '--key', key],
      env: [{ name: 'NATS_URL', value: 'nats://nats.apphost-system:4222' }],
    });
  });

  it('passes restricted Pod Security: non-root, no privilege escalation, no capabilities, read-only root, no token', () => {
    const pod = job().spec?.template.spec;
    expect(pod).toMatchObject({
      automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
    });
    for (const c of [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])]) {
      expect(c.securityContext, c.name).toEqual({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
      // it writes only to its volumes
      expect(c.volumeMounts?.map((m) => m.mountPath)).toEqual(['/work', '/tmp']);
    }
  });
});
