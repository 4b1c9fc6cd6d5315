/**
 * gateway.dataPlane (docs/design/native-data-plane.md §6): `native` (the default since step 9) and `node`, which gives the gateway
 * APPHOST_GATEWAY_DATA_PLANE=node and nothing else; `native` adds the data plane's env and the emptyDir at
 * /run/apphost its hand-off socket lives in (the root filesystem is read-only), and the API server accepts
 * the result. The schema refuses `native` beside any gateway.processes but 1 (v1 fronts one Node process),
 * and bad values; the env it renders is what the gateway's own settings parser accepts.
 */
import { describe, expect, inject, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { parseGatewayEnv } from '../../../src/gateway/config.ts';
import { CHART, run } from './helpers.ts';

// biome-ignore lint/suspicious/noExplicitAny: rendered YAML, whose shape the assertions check
type Obj = { kind: string; metadata: { name: string }; spec?: any };

const template = (set: string[], extra: string[] = []) =>
  run('helm', [
    'template',
    'dp',
    CHART,
    '--show-only',
    'templates/gateway.yaml',
    ...set.flatMap((s) => ['--set', s]),
    ...extra,
  ]);

async function gatewayPod(...set: string[]) {
  const r = await template(set);
  expect(r.code, r.stderr).toBe(0);
  const deployment = parseAllDocuments(r.stdout)
    .map((d) => d.toJSON() as Obj)
    .find((o) => o?.kind === 'Deployment');
  const pod = deployment?.spec.template.spec;
  const container = pod.containers[0];
  const env = Object.fromEntries(
    (container.env as Array<{ name: string; value?: string }>)
      .filter((e) => e.value !== undefined)
      .map((e) => [e.name, e.value as string]),
  );
  return {
    env,
    volumes: pod.volumes as Array<{ name: string; emptyDir?: object }>,
    mounts: container.volumeMounts as Array<{ name: string; mountPath: string }>,
  };
}

/** The gateway's settings from the rendered env; the values the pod takes from Secrets and fields stand in. */
const settingsOf = (env: Record<string, string>) =>
  parseGatewayEnv({ ...env, APPHOST_PLATFORM_KEY: 'k'.repeat(48), POD_NAMESPACE: 'ns', POD_NAME: 'gw-0' });

describe('chart: gateway.dataPlane', () => {
  it('native is the default (issue 16, step 9): the same pod as gateway.dataPlane=native', async () => {
    expect(await gatewayPod()).toEqual(await gatewayPod('gateway.dataPlane=native'));
    expect((await gatewayPod()).env.APPHOST_GATEWAY_DATA_PLANE).toBe('native');
  });

  it('node: the gateway is told node, and gets no data plane env or volume', async () => {
    const pod = await gatewayPod('gateway.dataPlane=node');
    expect(pod.env.APPHOST_GATEWAY_DATA_PLANE).toBe('node');
    expect(Object.keys(pod.env).filter((k) => k.startsWith('APPHOST_GATEWAY_DATA_PLANE_'))).toEqual([]);
    expect(pod.mounts.map((m) => m.mountPath)).toEqual(['/tmp']);
    expect(settingsOf(pod.env).APPHOST_GATEWAY_DATA_PLANE).toBe('node');
  });

  it('native: the env, and an emptyDir at /run/apphost, the folder the gateway puts handoff.sock in', async () => {
    const pod = await gatewayPod('gateway.dataPlane=native', 'gateway.dataPlaneThreads=2');
    expect(pod.env).toMatchObject({
      APPHOST_GATEWAY_DATA_PLANE: 'native',
      APPHOST_GATEWAY_DATA_PLANE_DIR: '/run/apphost',
      APPHOST_GATEWAY_DATA_PLANE_THREADS: '2',
      APPHOST_GATEWAY_PROCESSES: '1',
    });
    const mount = pod.mounts.find((m) => m.mountPath === '/run/apphost');
    expect(mount).toBeDefined();
    expect(pod.volumes.find((v) => v.name === mount?.name)).toEqual({ name: mount?.name, emptyDir: {} });
    // What the pod's gateway reads from that env: native, the image's binary, the mounted folder.
    const parsed = settingsOf(pod.env);
    expect(parsed.APPHOST_GATEWAY_DATA_PLANE).toBe('native');
    expect(parsed.APPHOST_GATEWAY_DATA_PLANE_DIR).toBe(mount?.mountPath);
    expect(parsed.APPHOST_GATEWAY_DATA_PLANE_BIN).toBe('/app/bin/apphost-dataplane');
    expect(parsed.APPHOST_GATEWAY_DATA_PLANE_THREADS).toBe(2);
    // The default thread count.
    expect((await gatewayPod('gateway.dataPlane=native')).env.APPHOST_GATEWAY_DATA_PLANE_THREADS).toBe('1');
  });

  it('refuses native beside gateway.processes other than 1, naming the value to change', async () => {
    for (const processes of ['2', 'auto']) {
      const r = await template(['gateway.dataPlane=native', `gateway.processes=${processes}`]);
      expect(r.code, processes).not.toBe(0);
      expect(r.stderr, processes).toContain("at '/gateway/processes': value must be 1");
    }
    // Without the schema (helm --skip-schema-validation), the template refuses it in words.
    const skipped = await template(
      ['gateway.dataPlane=native', 'gateway.processes=2'],
      ['--skip-schema-validation'],
    );
    expect(skipped.code).not.toBe(0);
    expect(skipped.stderr).toContain('gateway.dataPlane=native needs gateway.processes=1 (got 2)');
    // Several processes stay allowed with node.
    expect((await template(['gateway.dataPlane=node', 'gateway.processes=2'])).code).toBe(0);
  });

  it('refuses a data plane other than node or native, and a thread count out of 1-64', async () => {
    const bad = await template(['gateway.dataPlane=rust']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("at '/gateway/dataPlane': value must be one of 'node', 'native'");
    for (const threads of ['0', '65', 'many']) {
      const r = await template(['gateway.dataPlane=native', `gateway.dataPlaneThreads=${threads}`]);
      expect(r.code, threads).not.toBe(0);
      expect(r.stderr, threads).toMatch(/at '\/gateway\/dataPlaneThreads'/);
    }
  });

  it('renders a native gateway the API server accepts (kubectl apply --dry-run=server)', async () => {
    const rendered = await template(['gateway.dataPlane=native'], ['--namespace', 'default']);
    expect(rendered.code, rendered.stderr).toBe(0);
    const applied = await run(
      'kubectl',
      ['apply', '--dry-run=server', '--kubeconfig', inject('kubeconfigPath'), '-n', 'default', '-f', '-'],
      { input: rendered.stdout },
    );
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toMatch(/^deployment\.apps\/dp-apphost-gateway created \(server dry run\)$/m);
  });
});
