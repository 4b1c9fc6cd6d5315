/**
 * Two of every piece, as the chart renders it (`helm template`): replicas, PodDisruptionBudgets,
 * anti-affinity and topology spread for the platform Deployments; the stream replica setting and
 * NATS_URL every piece gets; an external NATS cluster instead of the bundled server.
 */
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
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
