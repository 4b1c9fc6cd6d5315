/**
 * Two of every piece and NATS as a cluster, as the chart renders them (`helm template`): replicas,
 * PodDisruptionBudgets, anti-affinity and topology spread for the platform Deployments; the stream
 * replica setting and NATS_URL every piece gets; a 3-server JetStream StatefulSet with routes whose
 * rendered config the real nats-server accepts; an external NATS cluster instead of the bundled one.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { binaryPath } from '../../harness/binaries.ts';
import { CHART, run } from './helpers.ts';

// biome-ignore lint/suspicious/noExplicitAny: rendered YAML, whose shape the assertions check
type Obj = { kind: string; metadata: { name: string }; spec?: any; data?: Record<string, string> };

async function render(...set: string[]): Promise<Obj[]> {
  const r = await run('helm', [
    'template',
    'ha',
    CHART,
    '--namespace',
    'ha-ns',
    ...set.flatMap((s) => ['--set', s]),
  ]);
  expect(r.code, r.stderr).toBe(0);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJSON() as Obj)
    .filter((o) => o?.kind);
}

const envOf = (o: Obj) =>
  Object.fromEntries(
    (o.spec.template.spec.containers[0].env as Array<{ name: string; value?: string }>).map((e) => [
      e.name,
      e.value,
    ]),
  );

describe('chart: two of every piece', () => {
  it('runs every platform Deployment twice, with a PDB, anti-affinity and zone spread', async () => {
    const objs = await render();
    const deployments = objs.filter((o) => o.kind === 'Deployment');
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual(
      ['ha-apphost-gateway', 'ha-apphost-management', 'ha-apphost-operator', 'ha-apphost-webhooks'].sort(),
    );
    const pdbs = new Map(
      objs.filter((o) => o.kind === 'PodDisruptionBudget').map((p) => [p.metadata.name, p]),
    );
    for (const d of deployments) {
      expect(d.spec.replicas, d.metadata.name).toBeGreaterThanOrEqual(2);
      expect(pdbs.get(d.metadata.name)?.spec.minAvailable, d.metadata.name).toBe(1);
      const pod = d.spec.template.spec;
      expect(pod.affinity?.podAntiAffinity, d.metadata.name).toBeDefined();
      expect(pod.topologySpreadConstraints?.[0]).toMatchObject({
        topologyKey: 'topology.kubernetes.io/zone',
        maxSkew: 1,
      });
      expect(envOf(d).APPHOST_NATS_REPLICAS, d.metadata.name).toBe('auto');
      expect(envOf(d).NATS_URL).toBe('nats://ha-apphost-nats.ha-ns.svc:4222');
    }
  });

  it('uses an external NATS cluster instead, named by every server, with a fixed stream replica count', async () => {
    const url = 'nats://n1.example:4222,nats://n2.example:4222,nats://n3.example:4222';
    const objs = await render(`nats.url=${url.replaceAll(',', '\\,')}`, 'nats.streamReplicas=3');
    expect(objs.some((o) => o.metadata.name.includes('-nats'))).toBe(false);
    for (const d of objs.filter((o) => o.kind === 'Deployment')) {
      expect(envOf(d).NATS_URL).toBe(url);
      expect(envOf(d).APPHOST_NATS_REPLICAS).toBe('3');
    }
  });
});

describe('chart: NATS as a 3-server JetStream cluster', () => {
  it('renders a StatefulSet of three with routes, a PDB of one away, and a config nats-server accepts', async () => {
    const objs = await render();
    const sts = objs.find((o) => o.kind === 'StatefulSet' && o.metadata.name === 'ha-apphost-nats') as Obj;
    expect(sts.spec.replicas).toBe(3);
    expect(sts.spec.podManagementPolicy).toBe('Parallel');
    expect(sts.spec.template.spec.containers[0].lifecycle.preStop.exec.command.join(' ')).toContain('ldm');
    const pdb = objs.find((o) => o.kind === 'PodDisruptionBudget' && o.metadata.name === 'ha-apphost-nats');
    expect(pdb?.spec.maxUnavailable).toBe(1);
    const config = objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'ha-apphost-nats-config');
    const conf = config?.data?.['nats.conf'] ?? '';
    for (const i of [0, 1, 2])
      expect(conf).toContain(`nats://ha-apphost-nats-${i}.ha-apphost-nats-headless.ha-ns.svc:6222`);
    const dir = mkdtempSync(join(tmpdir(), 'apphost-chart-nats-'));
    const file = join(dir, 'nats.conf');
    writeFileSync(
      file,
      conf.replace('/var/run/nats/nats.pid', join(dir, 'nats.pid')).replace('/data', join(dir, 'data')),
    );
    const checked = await run(binaryPath('nats-server'), ['-c', file, '-t'], {
      env: { ...process.env, SERVER_NAME: 'ha-apphost-nats-0' },
    });
    rmSync(dir, { recursive: true, force: true });
    expect(checked.code, checked.stdout + checked.stderr).toBe(0);
  });

  it('keeps a single server without routes or PDB when asked for one', async () => {
    const objs = await render('nats.bundled.replicas=1');
    const sts = objs.find((o) => o.kind === 'StatefulSet') as Obj;
    expect(sts.spec.replicas).toBe(1);
    expect(
      objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name.endsWith('nats-config'))?.data?.[
        'nats.conf'
      ],
    ).not.toContain('routes');
    expect(objs.some((o) => o.kind === 'PodDisruptionBudget' && o.metadata.name === 'ha-apphost-nats')).toBe(
      false,
    );
  });

  it('refuses one existing claim for several servers', async () => {
    const r = await run('helm', [
      'template',
      'ha',
      CHART,
      '--set',
      'nats.bundled.storage.type=existingClaim',
      '--set',
      'nats.bundled.storage.existingClaim=data',
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/replicas=1/);
  });
});
