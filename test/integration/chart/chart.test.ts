/**
 * The Helm chart against the real test control plane: lint, server-side dry-run of the rendered
 * objects (real schema validation), then a real `helm install` / `upgrade` / `uninstall`, checking what
 * it creates, that the platform key survives an upgrade, and what each ServiceAccount may do.
 * No pods run (the control plane has no nodes); the objects are what is under test.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppsV1Api, CoreV1Api, PolicyV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { gatewayKubeReader } from '../../../src/gateway/kube-client.ts';
import { DEFAULT_GATEWAY_KUBE_SETTINGS } from '../../../src/gateway/kube-settings.ts';
import { watchKeySetSecret } from '../../../src/gateway/run-token-keys.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import {
  generateSigningKey,
  type KeySet,
  RUN_TOKEN_KEYS_SECRET,
  RUN_TOKEN_KEYS_SECRET_KEY,
  rotate,
} from '../../../src/shared/run-tokens.ts';
import { createTestNamespace, testKubeAccess, testKubeConfig } from '../../harness/kube.ts';
import { waitFor } from '../../harness/process.ts';
import { CHART, REPO, run } from './helpers.ts';

const kubeconfig = () => inject('kubeconfigPath');

describe('charts/apphost', () => {
  const kc = testKubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const policy = kc.makeApiClient(PolicyV1Api);
  const release = `ah${randomBytes(3).toString('hex')}`;
  const fullname = `${release}-apphost`;
  let namespace: string;

  beforeAll(async () => {
    namespace = await createTestNamespace(kc, 'chart');
  });

  afterAll(async () => {
    await run('helm', ['uninstall', release, '--namespace', namespace, '--kubeconfig', kubeconfig()]);
    // Cluster-scoped leftovers (namespaced ones go with the namespace).
    for (const piece of ['operator', 'gateway', 'management']) {
      await rbac.deleteClusterRole({ name: `${fullname}-${piece}` }).catch(() => {});
      await rbac.deleteClusterRoleBinding({ name: `${fullname}-${piece}` }).catch(() => {});
    }
    await core.deleteNamespace({ name: namespace }).catch(() => {});
  });

  it('passes helm lint (with the schema, strict)', async () => {
    const r = await run('helm', ['lint', '--strict', CHART]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('0 chart(s) failed');
  });

  it('rejects values the schema forbids', async () => {
    const bad = await run('helm', ['template', 'x', CHART, '--set', 'gateway.port=0']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/gateway\/port/);
    const noNats = await run('helm', ['template', 'x', CHART, '--set', 'nats.bundled.enabled=false']);
    expect(noNats.code).not.toBe(0);
    for (const processes of ['0', '65', 'many']) {
      const r = await run('helm', ['template', 'x', CHART, '--set', `gateway.processes=${processes}`]);
      expect(r.code, processes).not.toBe(0);
      expect(r.stderr).toMatch(/gateway\/processes/);
    }
  });

  it('hands gateway.processes to the gateway as APPHOST_GATEWAY_PROCESSES (default 1)', async () => {
    const env = async (set: string[]) => {
      const r = await run('helm', ['template', 'x', CHART, '--show-only', 'templates/gateway.yaml', ...set]);
      expect(r.code, r.stderr).toBe(0);
      return /name: APPHOST_GATEWAY_PROCESSES\n\s+value: "([^"]*)"/.exec(r.stdout)?.[1];
    };
    expect(await env([])).toBe('1');
    // Several processes need the Node data plane (native, the default, refuses them: data-plane.test.ts).
    const node = ['--set', 'gateway.dataPlane=node'];
    expect(await env([...node, '--set', 'gateway.processes=2'])).toBe('2');
    expect(await env([...node, '--set', 'gateway.processes=auto'])).toBe('auto');
  });

  it("gives the gateway NODE_OPTIONS of gateway.nodeOptions alone, without the image's --enable-source-maps", async () => {
    const env = async (set: string[]) => {
      const r = await run('helm', ['template', 'x', CHART, '--show-only', 'templates/gateway.yaml', ...set]);
      expect(r.code, r.stderr).toBe(0);
      return /name: NODE_OPTIONS\n\s+value: "([^"]*)"/.exec(r.stdout)?.[1];
    };
    expect(await env([])).toBe('--max-semi-space-size=8 --expose-gc');
    expect(await env(['--set', 'gateway.nodeOptions=--max-semi-space-size=4 --max-old-space-size=256'])).toBe(
      '--max-semi-space-size=4 --max-old-space-size=256',
    );
    // Empty, the variable still overrides the image's NODE_OPTIONS.
    expect(await env(['--set', 'gateway.nodeOptions='])).toBe('');
    expect(await env(['--set', 'gateway.nodeOptions=--enable-source-maps'])).toBe('--enable-source-maps');
  });

  it('gives the gateway the glibc malloc env of gateway.malloc (null: none); other names are refused', async () => {
    const env = async (set: string[]) => {
      const r = await run('helm', ['template', 'x', CHART, '--show-only', 'templates/gateway.yaml', ...set]);
      expect(r.code, r.stderr).toBe(0);
      return [...r.stdout.matchAll(/name: (MALLOC_\w+)\n\s+value: "([^"]*)"/g)].map((m) => `${m[1]}=${m[2]}`);
    };
    expect(await env([])).toEqual([
      'MALLOC_ARENA_MAX=2',
      'MALLOC_MMAP_THRESHOLD_=131072',
      'MALLOC_TRIM_THRESHOLD_=131072',
    ]);
    expect(await env(['--set', 'gateway.malloc=null'])).toEqual([]);
    expect(await env(['--set', 'gateway.malloc.MALLOC_ARENA_MAX=4'])).toContain('MALLOC_ARENA_MAX=4');
    const bad = await run('helm', ['template', 'x', CHART, '--set', 'gateway.malloc.LD_PRELOAD=x']);
    expect(bad.code).not.toBe(0);
  });

  it('gives the NATS servers the Go runtime env of nats.bundled.goRuntime (null: none); other names are refused', async () => {
    const env = async (set: string[]) => {
      const r = await run('helm', ['template', 'x', CHART, '--show-only', 'templates/nats.yaml', ...set]);
      expect(r.code, r.stderr).toBe(0);
      return [...r.stdout.matchAll(/name: (GO\w+)\n\s+value: "([^"]*)"/g)].map((m) => `${m[1]}=${m[2]}`);
    };
    expect(await env([])).toEqual(['GOGC=400', 'GOMEMLIMIT=900MiB']);
    expect(await env(['--set', 'nats.bundled.goRuntime=null'])).toEqual([]);
    expect(await env(['--set', 'nats.bundled.goRuntime.GOMAXPROCS=2'])).toContain('GOMAXPROCS=2');
    const bad = await run('helm', ['template', 'x', CHART, '--set', 'nats.bundled.goRuntime.GODEBUG=x']);
    expect(bad.code).not.toBe(0);
  });

  it("refuses a GOMEMLIMIT not below the NATS servers' memory limit, each read in its own units", async () => {
    const template = (set: string[]) =>
      run('helm', ['template', 'x', CHART, '--show-only', 'templates/nats.yaml', ...set]);
    const limit = (memory: string, goLimit?: string) => [
      '--set',
      `nats.bundled.resources.limits.memory=${memory}`,
      ...(goLimit ? ['--set', `nats.bundled.goRuntime.GOMEMLIMIT=${goLimit}`] : []),
    ];
    // A limit lowered without GOMEMLIMIT (900MiB): the pod would be OOM-killed before Go's collector reacts.
    for (const refused of [
      limit('512Mi'),
      limit('900M'),
      limit('9e8'),
      limit('1Gi', '1GiB'),
      limit('+.5Gi'),
    ]) {
      const r = await template(refused);
      expect(r.code, refused.join(' ')).not.toBe(0);
      expect(r.stderr).toMatch(
        /nats\.bundled\.goRuntime\.GOMEMLIMIT=\S+ \(\d+ MiB\) must be below nats\.bundled\.resources\.limits\.memory/,
      );
    }
    // 900M is 858 MiB, below 900MiB; 1G is 954 MiB, above it.
    for (const accepted of [
      limit('1G'),
      limit('.9Gi'),
      limit('+1Gi'),
      limit('1.Gi'),
      limit('512Mi', '460MiB'),
      limit('1Gi', '1073741823'),
      limit('512Mi', 'off'),
      ['--set', 'nats.bundled.resources.limits=null'],
      [...limit('512Mi'), '--set', 'nats.bundled.goRuntime=null'],
    ]) {
      const r = await template(accepted);
      expect(r.code, `${accepted.join(' ')}: ${r.stderr}`).toBe(0);
    }
    // Kubernetes' suffixes are not Go's: Go refuses GOMEMLIMIT=900Mi at start.
    const kubeUnits = await template(['--set', 'nats.bundled.goRuntime.GOMEMLIMIT=900Mi']);
    expect(kubeUnits.code).not.toBe(0);
    expect(kubeUnits.stderr).toMatch(/GOMEMLIMIT/);
    const noQuantity = await template(limit('lots'));
    expect(noQuantity.stderr).toMatch(/"lots" is not a Kubernetes memory quantity/);
  });

  it("writes a values file's whole numbers in full in the servers' env, and the GOMEMLIMIT guard reads them", async () => {
    // Helm reads a values file's numbers as float64, and toString writes 943718400 as 9.437184e+08: Go refuses
    // that GOMEMLIMIT at start, and glibc does not read that MALLOC_TRIM_THRESHOLD_ as a number.
    const values = (goLimit: number, limit = '1Gi') =>
      `nats:\n  bundled:\n    goRuntime:\n      GOMEMLIMIT: ${goLimit}\n    resources:\n      limits:\n        memory: ${limit}\n` +
      'gateway:\n  malloc:\n    MALLOC_TRIM_THRESHOLD_: 1048576\n';
    const template = (yaml: string, show: string) =>
      run('helm', ['template', 'x', CHART, '--show-only', show, '-f', '-'], { input: yaml });
    const nats = await template(values(943718400), 'templates/nats.yaml');
    expect(nats.code, nats.stderr).toBe(0);
    expect(nats.stdout).toMatch(/- name: GOMEMLIMIT\s+value: "943718400"\n/);
    const gateway = await template(values(943718400), 'templates/gateway.yaml');
    expect(gateway.code, gateway.stderr).toBe(0);
    expect(gateway.stdout).toMatch(/- name: MALLOC_TRIM_THRESHOLD_\s+value: "1048576"\n/);
    // 1Gi exactly, and a limit written as a number of bytes: refused, each named as it was written.
    const atLimit = await template(values(1073741824, '1073741824'), 'templates/nats.yaml');
    expect(atLimit.code).not.toBe(0);
    expect(atLimit.stderr).toContain(
      'GOMEMLIMIT=1073741824 (1024 MiB) must be below nats.bundled.resources.limits.memory=1073741824 (1024 MiB)',
    );
  });

  it('renders objects the API server accepts (kubectl apply --dry-run=server)', async () => {
    const rendered = await run('helm', [
      'template',
      `${release}dry`,
      CHART,
      '--namespace',
      namespace,
      '--include-crds',
    ]);
    expect(rendered.code, rendered.stderr).toBe(0);
    const applied = await run(
      'kubectl',
      ['apply', '--dry-run=server', '--kubeconfig', kubeconfig(), '--namespace', namespace, '-f', '-'],
      { input: rendered.stdout },
    );
    expect(applied.code, applied.stderr).toBe(0);
    // Cluster-scoped CRDs may already exist: other suites apply crds/ to the shared control plane.
    for (const kind of [
      'customresourcedefinition.apiextensions.k8s.io',
      'deployment.apps',
      'service',
      'serviceaccount',
      'secret',
      'clusterrole.rbac.authorization.k8s.io',
      'clusterrolebinding.rbac.authorization.k8s.io',
      'role.rbac.authorization.k8s.io',
      'rolebinding.rbac.authorization.k8s.io',
      'poddisruptionbudget.policy',
      'statefulset.apps',
    ])
      expect(applied.stdout).toMatch(
        new RegExp(
          `^${kind.replaceAll('.', '\\.')}/\\S+ (created|configured|unchanged) \\(server dry run\\)$`,
          'm',
        ),
      );
  });

  it('manifests/ applies too (kubectl apply --dry-run=server, in a test namespace)', async () => {
    const yaml = ['00-crds.yaml', '10-apphost.yaml']
      .map((f) => readFileSync(join(REPO, 'manifests', f), 'utf8'))
      .join('\n---\n')
      .replaceAll('namespace: apphost-system', `namespace: ${namespace}`);
    const applied = await run(
      'kubectl',
      ['apply', '--dry-run=server', '--kubeconfig', kubeconfig(), '-f', '-'],
      {
        input: yaml,
      },
    );
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toMatch(/^deployment\.apps\/apphost-gateway created \(server dry run\)$/m);
  });

  it('renders the external-NATS variant without the bundled server', async () => {
    const r = await run('helm', ['template', 'x', CHART, '--set', 'nats.url=nats://nats.example:4222']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain('kind: StatefulSet');
    expect(r.stdout).toContain('value: "nats://nats.example:4222"');
  });

  describe('helm install', () => {
    let platformKey: string;

    beforeAll(async () => {
      const r = await run(
        'helm',
        ['install', release, CHART, '--namespace', namespace, '--kubeconfig', kubeconfig()],
        {
          timeoutMs: 180_000,
        },
      );
      expect(r.code, r.stderr).toBe(0);
    }, 240_000);

    it('creates the four Deployments, their Services, ServiceAccounts, PDBs and the bundled NATS', async () => {
      const deployments = await apps.listNamespacedDeployment({ namespace });
      expect(deployments.items.map((d) => d.metadata?.name).sort()).toEqual(
        ['gateway', 'management', 'operator', 'webhooks'].map((p) => `${fullname}-${p}`),
      );
      for (const d of deployments.items) {
        const c = d.spec?.template.spec?.containers[0];
        expect(c?.args).toEqual([d.metadata?.labels?.['app.kubernetes.io/component']]);
        expect(c?.readinessProbe?.httpGet?.path).toBe('/readyz');
        expect(c?.livenessProbe?.httpGet?.path).toBe('/healthz');
        expect(c?.resources?.requests).toBeDefined();
        expect(d.metadata?.labels).toMatchObject({
          'app.kubernetes.io/name': 'apphost',
          'app.kubernetes.io/instance': release,
          'app.kubernetes.io/managed-by': 'Helm',
        });
      }
      const services = (await core.listNamespacedService({ namespace })).items.map((s) => s.metadata?.name);
      expect(services).toEqual(
        expect.arrayContaining([`${fullname}-gateway`, `${fullname}-management`, `${fullname}-nats`]),
      );
      const accounts = (await core.listNamespacedServiceAccount({ namespace })).items.map(
        (s) => s.metadata?.name,
      );
      expect(accounts).toEqual(
        expect.arrayContaining(
          ['gateway', 'management', 'operator', 'webhooks'].map((p) => `${fullname}-${p}`),
        ),
      );
      const pdbs = (await policy.listNamespacedPodDisruptionBudget({ namespace })).items.map(
        (p) => p.metadata?.name,
      );
      expect(pdbs.sort()).toEqual(
        ['gateway', 'management', 'nats', 'operator', 'webhooks'].map((p) => `${fullname}-${p}`),
      );
      const sts = await apps.readNamespacedStatefulSet({ namespace, name: `${fullname}-nats` });
      expect(sts.spec?.volumeClaimTemplates?.[0]?.spec?.resources?.requests?.storage).toBe('10Gi');
    });

    it('has the CRDs', async () => {
      const r = await run('kubectl', [
        'get',
        'crd',
        'apps.apphost.dev',
        'domainassignments.apphost.dev',
        '--kubeconfig',
        kubeconfig(),
      ]);
      expect(r.code, r.stderr).toBe(0);
    });

    it('generates the platform key on install and keeps it on upgrade', async () => {
      const read = async () =>
        Buffer.from(
          (await core.readNamespacedSecret({ namespace, name: `${fullname}-platform-key` })).data?.[
            'platform-key'
          ] ?? '',
          'base64',
        ).toString();
      platformKey = await read();
      expect(platformKey).toMatch(/^[A-Za-z0-9]{48}$/);
      const up = await run(
        'helm',
        [
          'upgrade',
          release,
          CHART,
          '--namespace',
          namespace,
          '--kubeconfig',
          kubeconfig(),
          '--set',
          'logLevel=debug',
        ],
        { timeoutMs: 180_000 },
      );
      expect(up.code, up.stderr).toBe(0);
      expect(await read()).toBe(platformKey);
    });

    const can = async (piece: string, verb: string, resource: string, ns?: string) => {
      const args = [
        'auth',
        'can-i',
        verb,
        resource,
        '--kubeconfig',
        kubeconfig(),
        `--as=system:serviceaccount:${namespace}:${fullname}-${piece}`,
      ];
      args.push(ns ? `--namespace=${ns}` : '--all-namespaces');
      const r = await run('kubectl', args);
      return r.stdout.trim() === 'yes';
    };

    it.each([
      ['operator', 'create', 'deployments.apps', undefined, true],
      ['operator', 'update', 'apps.apphost.dev/status', undefined, true],
      ['operator', 'create', 'ingresses.networking.k8s.io', 'OWN', true],
      ['operator', 'create', 'ingresses.networking.k8s.io', 'default', false],
      ['operator', 'list', 'namespaces', undefined, true],
      ['operator', 'watch', 'pods', undefined, true],
      ['operator', 'patch', 'pods', undefined, true],
      ['operator', 'get', 'pods', undefined, false],
      ['operator', 'delete', 'pods', undefined, false],
      ['operator', 'create', 'leases.coordination.k8s.io', 'OWN', true],
      ['operator', 'create', 'leases.coordination.k8s.io', 'default', false],
      ['operator', 'get', 'secrets', undefined, false],
      ['operator', 'delete', 'namespaces', undefined, false],
      ['gateway', 'list', 'domainassignments.apphost.dev', undefined, true],
      ['gateway', 'watch', 'endpointslices.discovery.k8s.io', undefined, true],
      ['gateway', 'create', 'domainassignments.apphost.dev', undefined, false],
      ['gateway', 'list', 'secrets', undefined, false],
      ['gateway', 'watch', 'secrets/apphost-run-token-keys', 'OWN', true],
      ['gateway', 'list', 'secrets/apphost-run-token-keys', 'OWN', true],
      ['gateway', 'get', 'secrets/apphost-run-token-keys', 'OWN', true],
      ['gateway', 'get', `secrets/${fullname}-platform-key`, 'OWN', false],
      ['gateway', 'list', 'secrets', 'OWN', false],
      ['management', 'delete', 'domainassignments.apphost.dev', undefined, true],
      ['management', 'create', 'secrets', undefined, true],
      ['management', 'update', 'secrets', undefined, true],
      ['management', 'patch', 'secrets', undefined, false],
      ['management', 'watch', 'secrets', undefined, false],
      ['management', 'update', 'domainassignments.apphost.dev', undefined, true],
      ['management', 'patch', 'domainassignments.apphost.dev', undefined, false],
      // Deploys apply, roll back and delete Apps, and run dependency builds as Jobs.
      ['management', 'create', 'apps.apphost.dev', undefined, true],
      ['management', 'patch', 'apps.apphost.dev', undefined, true],
      ['management', 'delete', 'apps.apphost.dev', undefined, true],
      ['management', 'update', 'apps.apphost.dev', undefined, false],
      ['management', 'create', 'jobs.batch', undefined, true],
      ['management', 'update', 'jobs.batch', undefined, false],
      ['management', 'create', 'deployments.apps', undefined, false],
      ['webhooks', 'get', 'secrets', undefined, false],
      ['webhooks', 'list', 'apps.apphost.dev', undefined, false],
    ])('%s may %s %s (in %s): %s', async (piece, verb, resource, ns, want) => {
      expect(await can(piece, verb, resource, ns === 'OWN' ? namespace : ns)).toBe(want);
    });

    it("the gateway's identity watches the run-token key Secret: created after it starts, rotated", async () => {
      // As the gateway's ServiceAccount: only its RBAC applies (a list or watch of all Secrets is refused).
      const admin = await testKubeAccess();
      const asGateway = gatewayKubeReader(
        {
          ...admin,
          headers: () => ({
            ...admin.headers(),
            'impersonate-user': `system:serviceaccount:${namespace}:${fullname}-gateway`,
          }),
        },
        DEFAULT_GATEWAY_KUBE_SETTINGS,
      );
      const source = watchKeySetSecret({ client: asGateway, namespace, log: silentLogger() });
      const secret = (set: KeySet) => ({
        metadata: { name: RUN_TOKEN_KEYS_SECRET, namespace },
        data: { [RUN_TOKEN_KEYS_SECRET_KEY]: Buffer.from(JSON.stringify(set)).toString('base64') },
      });
      try {
        const first = { keys: [await generateSigningKey()] };
        await core.createNamespacedSecret({ namespace, body: secret(first) });
        await waitFor(
          'the key set',
          async () => source.current()?.keys[0]?.kid === first.keys[0]?.kid,
          30_000,
        );
        const rotated = rotate(first, await generateSigningKey());
        await core.replaceNamespacedSecret({ namespace, name: RUN_TOKEN_KEYS_SECRET, body: secret(rotated) });
        await waitFor(
          'the rotated key set',
          async () =>
            source
              .current()
              ?.keys.map((k) => k.kid)
              .join() === rotated.keys.map((k) => k.kid).join(),
          30_000,
        );
      } finally {
        await source.stop();
        await asGateway.close();
      }
    });

    it('keeps the platform key Secret on uninstall', async () => {
      const r = await run('helm', [
        'uninstall',
        release,
        '--namespace',
        namespace,
        '--kubeconfig',
        kubeconfig(),
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout + r.stderr).toMatch(/kept due to the resource policy/);
      const s = await core.readNamespacedSecret({ namespace, name: `${fullname}-platform-key` });
      expect(Buffer.from(s.data?.['platform-key'] ?? '', 'base64').toString()).toBe(platformKey);
      expect((await apps.listNamespacedDeployment({ namespace })).items).toEqual([]);
    });
  });
});
