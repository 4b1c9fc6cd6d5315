import { describe, expect, it } from 'vitest';
import type { App } from '../../../apis/v1alpha1/types.ts';
import type { Deployment } from '../../../shared/kube/objects.ts';
import { APPLIED_HASH_ANNOTATION } from '../../runtime/desired-state.ts';
import { hardenPod, makeDeployment } from './deployment.ts';
import { makeService } from './service.ts';

const settings = {
  runtimeImage: 'ghcr.io/apphost/runtime-python:0.1.0',
  terminationGraceMarginSeconds: 10,
  appStartupTimeoutSeconds: 300,
};
const app = (spec: App['spec']): App => ({
  apiVersion: 'apphost.dev/v1alpha1',
  kind: 'App',
  metadata: { name: 'hello', namespace: 'p1', uid: 'u1' },
  spec,
});
const pod = (d: Deployment) => d.spec.template.spec!;
const first = (d: Deployment) => pod(d).containers[0]!;
const container = (a: App) => first(makeDeployment(a, settings));

describe('makeDeployment', () => {
  it('cortex with a ConfigMap: runtime image, runtime command, code at /app, runtime probes', () => {
    const d = makeDeployment(
      app({ runtime: 'cortex', code: { configMapRef: { name: 'code-1' } } }),
      settings,
    );
    const c = first(d);
    expect(c.image).toBe(settings.runtimeImage);
    expect(c.command).toEqual([
      'python',
      '-m',
      'apphost_runtime',
      '--app-dir',
      '/app',
      '--port',
      '8080',
      '--grace-seconds',
      '900',
    ]);
    expect(c.volumeMounts).toEqual([
      { name: 'code', mountPath: '/app', readOnly: true },
      { name: 'tmp', mountPath: '/tmp' },
    ]);
    expect(pod(d).volumes).toEqual([
      { name: 'code', configMap: { name: 'code-1' } },
      { name: 'tmp', emptyDir: {} },
    ]);
    expect(c.readinessProbe?.httpGet).toEqual({ path: '/ready', port: 'http' });
    expect(c.livenessProbe?.httpGet).toEqual({ path: '/health', port: 'http' });
    expect(pod(d).terminationGracePeriodSeconds).toBe(910);
    expect(d.spec.replicas).toBe(1);
  });

  it('cortex with code baked into the image: no volume', () => {
    const d = makeDeployment(app({ runtime: 'cortex', image: 'me/app:3' }), settings);
    expect(first(d).image).toBe('me/app:3');
    expect(pod(d).volumes).toEqual([{ name: 'tmp', emptyDir: {} }]);
    expect(first(d).volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
  });

  it('custom: entrypoint, port and probe paths from the spec', () => {
    const c = container(
      app({ runtime: 'custom', image: 'me/srv:1', port: 9000, entrypoint: ['/srv'], healthcheckPath: '/hz' }),
    );
    expect(c.command).toEqual(['/srv']);
    expect(c.ports).toEqual([{ name: 'http', containerPort: 9000, protocol: 'TCP' }]);
    expect(c.livenessProbe?.httpGet?.path).toBe('/hz');
    expect(c.readinessProbe?.httpGet?.path).toBe('/hz');
  });

  it.each<[string, App['spec']['scaling'], number | undefined, number]>([
    ['no decision yet: minReplicas', { minReplicas: 2 }, undefined, 2],
    ['no decision yet, minReplicas 0: one replica proves the App starts', { minReplicas: 0 }, undefined, 1],
    ['the autoscaler decided', { minReplicas: 0, maxReplicas: 5 }, 4, 4],
    ['the autoscaler decided zero', { minReplicas: 0 }, 0, 0],
    ['a decision above a lowered maxReplicas is clamped', { maxReplicas: 2 }, 4, 2],
    ['a decision below a raised minReplicas is clamped', { minReplicas: 3 }, 1, 3],
  ])('replicas: %s', (_name, scaling, desired, want) => {
    const a = app({ runtime: 'cortex', image: 'x:1', scaling });
    if (desired !== undefined) a.status = { desiredReplicas: desired };
    expect(makeDeployment(a, settings).spec.replicas).toBe(want);
  });

  it.each<[string, App['spec']]>([
    ['cortex', { runtime: 'cortex', code: { configMapRef: { name: 'c' } } }],
    ['custom', { runtime: 'custom', image: 'me/srv:1', port: 9000 }],
  ])('%s pods meet Pod Security "restricted", init containers included', (_n, spec) => {
    const d = makeDeployment(app(spec), settings);
    // What the deploy init container looks like to the builder: added before hardening.
    const p = hardenPod(app(spec), {
      ...pod(d),
      initContainers: [{ name: 'fetch-code', image: 'apphost:1' }],
    });
    expect(p.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 10001,
      runAsGroup: 10001,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(p.automountServiceAccountToken).toBe(false);
    for (const c of [...p.initContainers!, ...p.containers]) {
      expect(c.securityContext).toEqual({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
      expect(c.terminationMessagePolicy).toBe('FallbackToLogsOnError');
      expect(c.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp' });
    }
    for (const vol of p.volumes ?? []) expect(vol.hostPath).toBeUndefined();
    // The builder's own output is already hardened.
    expect(pod(d).securityContext).toEqual(p.securityContext);
    expect(first(d).securityContext).toEqual(p.containers[0]?.securityContext);
  });

  it('an App may opt in to the ServiceAccount token', () => {
    const d = makeDeployment(
      app({ runtime: 'cortex', image: 'x:1', automountServiceAccountToken: true }),
      settings,
    );
    expect(pod(d).automountServiceAccountToken).toBe(true);
  });

  it('a startup probe every second, bounded by the startup timeout, gates readiness and liveness', () => {
    const c = container(app({ runtime: 'cortex', image: 'x:1' }));
    expect(c.startupProbe).toEqual({
      httpGet: { path: '/ready', port: 'http' },
      periodSeconds: 1,
      failureThreshold: 300,
    });
    expect(c.livenessProbe?.initialDelaySeconds).toBeUndefined();
    const custom = first(
      makeDeployment(app({ runtime: 'custom', image: 'me/srv:1', port: 80, readinessPath: '/rz' }), {
        ...settings,
        appStartupTimeoutSeconds: 45,
      }),
    );
    expect(custom.startupProbe).toMatchObject({ httpGet: { path: '/rz' }, failureThreshold: 45 });
  });

  it('a preStop pause before SIGTERM, covered by the termination grace period; the runtime knows its limit', () => {
    const d = makeDeployment(
      app({
        runtime: 'cortex',
        image: 'x:1',
        responseGracePeriodSeconds: 60,
        scaling: { replicaConcurrency: 4 },
      }),
      { ...settings, preStopDelaySeconds: 5 },
    );
    expect(first(d).lifecycle).toEqual({ preStop: { sleep: { seconds: 5 } } });
    expect(pod(d).terminationGracePeriodSeconds).toBe(5 + 60 + 10);
    expect(first(d).env).toContainEqual({ name: 'APPHOST_MAX_CONCURRENCY', value: '4' });
    expect(
      first(makeDeployment(app({ runtime: 'cortex', image: 'x:1' }), settings)).lifecycle,
    ).toBeUndefined();
  });

  it('custom without entrypoint keeps the image entrypoint', () => {
    expect(container(app({ runtime: 'custom', image: 'me/srv:1', port: 80 })).command).toBeUndefined();
  });

  it('grace period, replicas, resources, env and secrets', () => {
    const d = makeDeployment(
      app({
        runtime: 'cortex',
        image: 'x:1',
        responseGracePeriodSeconds: 43_200,
        scaling: { minReplicas: 3, maxReplicas: 5 },
        resources: { cpu: '2', memory: '1Gi', gpu: 2 },
        env: [
          { name: 'A', value: '1' },
          { name: 'B', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } },
        ],
        envFromSecrets: ['all'],
      }),
      settings,
    );
    const c = first(d);
    expect(d.spec.replicas).toBe(3);
    expect(pod(d).terminationGracePeriodSeconds).toBe(43_210);
    expect(c.command).toContain('43200');
    expect(c.resources).toEqual({
      requests: { cpu: '2', memory: '1Gi' },
      limits: { memory: '1Gi', 'nvidia.com/gpu': '2' },
    });
    expect(c.env).toEqual([
      { name: 'APPHOST_APP_NAME', value: 'hello' },
      { name: 'HOME', value: '/tmp' },
      { name: 'APPHOST_MAX_CONCURRENCY', value: '100' },
      { name: 'A', value: '1' },
      { name: 'B', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } },
    ]);
    expect(c.envFrom).toEqual([{ secretRef: { name: 'all' } }]);
  });

  it('labels, selector and owner reference', () => {
    const d = makeDeployment(app({ runtime: 'cortex', image: 'x:1' }), settings);
    expect(d.spec.selector).toEqual({ matchLabels: { 'apphost.dev/app': 'hello' } });
    expect(d.spec.template.metadata?.labels).toMatchObject({
      'apphost.dev/app': 'hello',
      'app.kubernetes.io/name': 'hello',
    });
    expect(d.metadata.ownerReferences).toEqual([
      {
        apiVersion: 'apphost.dev/v1alpha1',
        kind: 'App',
        name: 'hello',
        uid: 'u1',
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
  });

  it('the intent hash changes with the spec and only with it', () => {
    const h = (a: App) => makeDeployment(a, settings).metadata.annotations?.[APPLIED_HASH_ANNOTATION];
    const a = app({ runtime: 'cortex', image: 'x:1' });
    expect(h(a)).toBe(h(app({ runtime: 'cortex', image: 'x:1' })));
    expect(h(a)).not.toBe(h(app({ runtime: 'cortex', image: 'x:2' })));
  });
});

describe('makeDeployment: code from apphost deploy (spec.code.artifacts)', () => {
  const bundle = `sha256:${'a'.repeat(64)}` as const;
  const dependencies = `sha256:${'b'.repeat(64)}` as const;
  const fetch = { platformImage: 'apphost:9', natsUrl: 'nats://nats.apphost-system:4222' };
  const deployed = (artifacts: NonNullable<NonNullable<App['spec']['code']>['artifacts']>) =>
    makeDeployment(app({ runtime: 'cortex', code: { artifacts } }), { ...settings, artifactFetch: fetch });

  it('an init container of the platform image fetches and checks the bundle and the dependency set', () => {
    const d = deployed({ bundle, dependencies });
    expect(pod(d).initContainers).toHaveLength(1);
    expect(pod(d).initContainers?.[0]).toMatchObject({
      name: 'fetch-code',
      image: 'apphost:9',
      args: [
        'fetch-artifacts',
        '--bundle',
        bundle,
        // Not /app: that is the platform image's own folder (a volume there would hide its program).
        '--into',
        '/fetch/app',
        '--dependencies',
        dependencies,
        '--dependencies-into',
        '/fetch/deps',
      ],
      env: [{ name: 'NATS_URL', value: 'nats://nats.apphost-system:4222' }],
      // hardened like every container of the pod (restricted Pod Security)
      securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false },
    });
    expect(pod(d).initContainers?.[0]?.volumeMounts).toEqual(
      expect.arrayContaining([
        { name: 'code', mountPath: '/fetch/app' },
        { name: 'deps', mountPath: '/fetch/deps' },
      ]),
    );
    expect(pod(d).volumes).toEqual(
      expect.arrayContaining([
        { name: 'code', emptyDir: {} },
        { name: 'deps', emptyDir: {} },
      ]),
    );
    const c = first(d);
    expect(c.image).toBe(settings.runtimeImage);
    expect(c.volumeMounts).toEqual(
      expect.arrayContaining([
        { name: 'code', mountPath: '/app', readOnly: true },
        { name: 'deps', mountPath: '/deps', readOnly: true },
      ]),
    );
    expect(c.command?.slice(-2)).toEqual(['--deps-dir', '/deps']);
  });

  it('without a dependency set: only the bundle, no deps volume or --deps-dir', () => {
    const d = deployed({ bundle });
    expect(pod(d).initContainers?.[0]?.args).toEqual([
      'fetch-artifacts',
      '--bundle',
      bundle,
      '--into',
      '/fetch/app',
    ]);
    expect(pod(d).volumes?.map((v) => v.name)).toEqual(['code', 'tmp']);
    expect(first(d).command).not.toContain('--deps-dir');
  });

  it('a new version is a new pod template (so Kubernetes rolls it); the same version is the same one', () => {
    const tpl = (a: Parameters<typeof deployed>[0]) => JSON.stringify(deployed(a).spec.template);
    expect(tpl({ bundle, dependencies })).toBe(tpl({ bundle, dependencies }));
    expect(tpl({ bundle: `sha256:${'c'.repeat(64)}`, dependencies })).not.toBe(tpl({ bundle, dependencies }));
    expect(tpl({ bundle, dependencies: `sha256:${'d'.repeat(64)}` })).not.toBe(tpl({ bundle, dependencies }));
  });
});

describe('makeService', () => {
  it('port 80 named http → the container port', () => {
    expect(makeService(app({ runtime: 'cortex', image: 'x:1' })).spec.ports).toEqual([
      { name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' },
    ]);
    expect(
      makeService(app({ runtime: 'custom', image: 'x:1', port: 3000 })).spec.ports?.[0]?.targetPort,
    ).toBe(3000);
  });
});
