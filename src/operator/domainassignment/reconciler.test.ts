import { describe, expect, it } from 'vitest';
import type { App, DomainAssignment } from '../../apis/v1alpha1/types.ts';
import { type Ingress, type KubeObject, Resources, type Service } from '../../shared/kube/objects.ts';
import { createFakeKubeClient } from '../../shared/kube/testing/fake-kube-client.ts';
import { silentLogger } from '../../shared/log.ts';
import { createFakeEventRecorder } from '../runtime/testing/fake-events.ts';
import { createDomainReconciler } from './reconciler.ts';
import { ingressName, LEGACY_FINALIZER, makeIngress } from './resources/ingress.ts';

const settings = {
  gatewayNamespace: 'gw',
  gatewayService: 'gateway',
  gatewayPort: 80,
  ingressClass: undefined,
};
const clock = { now: () => Date.parse('2026-01-01T00:00:00Z'), sleep: async () => {} };

function da(
  spec: Partial<DomainAssignment['spec']>,
  meta: Partial<DomainAssignment['metadata']> = {},
): DomainAssignment {
  return {
    apiVersion: 'apphost.dev/v1alpha1',
    kind: 'DomainAssignment',
    metadata: {
      name: 'dom-1',
      namespace: 'p1',
      uid: 'd1',
      generation: 1,
      resourceVersion: '5',
      creationTimestamp: '2026-01-01T00:00:00Z',
      ...meta,
    },
    spec: { hostname: 'api.example.com', ...spec },
  };
}
const app = (name: string): App => ({
  apiVersion: 'apphost.dev/v1alpha1',
  kind: 'App',
  metadata: { name, namespace: 'p1' },
  spec: { runtime: 'cortex', image: 'x' },
});

const gatewayService: Service = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'gateway', namespace: 'gw', uid: 'gw-uid' },
  spec: {},
};

interface Row {
  name: string;
  domain: DomainAssignment;
  others?: DomainAssignment[];
  apps?: string[];
  ingress?: Ingress;
  /** The gateway Service; absent: the one every install has. */
  noGateway?: boolean;
  wantWrites: string[];
  wantReason?: string;
}

const table: Row[] = [
  {
    name: 'removes the finalizer of earlier versions first, and nothing else',
    domain: da({ appName: 'alpha' }, { finalizers: [LEGACY_FINALIZER] }),
    apps: ['alpha'],
    wantWrites: ['patch domainassignments dom-1'],
  },
  {
    name: 'adds no finalizer',
    domain: da({ appName: '' }),
    wantWrites: ['patch-status domainassignments dom-1'],
    wantReason: 'Unassigned',
  },
  {
    name: 'an assigned domain gets its Ingress and Ready=Routed',
    domain: da({ appName: 'alpha' }),
    apps: ['alpha'],
    wantWrites: ['apply ingresses domain-p1.dom-1', 'patch-status domainassignments dom-1'],
    wantReason: 'Routed',
  },
  {
    name: 'an Ingress already in place is not written again',
    domain: da({ appName: 'alpha' }),
    apps: ['alpha'],
    ingress: makeIngress(da({ appName: 'alpha' }), settings, gatewayService),
    wantWrites: ['patch-status domainassignments dom-1'],
    wantReason: 'Routed',
  },
  {
    name: 'unassigning deletes the Ingress',
    domain: da({ appName: '' }),
    ingress: makeIngress(da({ appName: 'alpha' }), settings, gatewayService),
    wantWrites: ['delete ingresses domain-p1.dom-1', 'patch-status domainassignments dom-1'],
    wantReason: 'Unassigned',
  },
  {
    name: 'an app that does not exist: no Ingress, Ready=False AppNotFound',
    domain: da({ appName: 'ghost' }),
    wantWrites: ['patch-status domainassignments dom-1'],
    wantReason: 'AppNotFound',
  },
  {
    name: 'a hostname claimed by an older domain is a conflict',
    domain: da({ appName: 'alpha' }, { creationTimestamp: '2026-01-02T00:00:00Z' }),
    others: [da({ appName: 'alpha' }, { name: 'dom-0', creationTimestamp: '2026-01-01T00:00:00Z' })],
    apps: ['alpha'],
    wantWrites: ['patch-status domainassignments dom-1'],
    wantReason: 'HostnameConflict',
  },
  {
    name: 'an Ingress under the earlier, ambiguous name is replaced',
    domain: da({ appName: 'alpha' }),
    apps: ['alpha'],
    ingress: (() => {
      const ing = makeIngress(da({ appName: 'alpha' }), settings, gatewayService);
      return { ...ing, metadata: { ...ing.metadata, name: 'domain-p1-dom-1' } };
    })(),
    wantWrites: [
      'delete ingresses domain-p1-dom-1',
      'apply ingresses domain-p1.dom-1',
      'patch-status domainassignments dom-1',
    ],
    wantReason: 'Routed',
  },
  {
    name: 'a domain being deleted loses its Ingress',
    domain: da({ appName: 'alpha' }, { deletionTimestamp: '2026-01-03T00:00:00Z' }),
    ingress: makeIngress(da({ appName: 'alpha' }), settings, gatewayService),
    wantWrites: ['delete ingresses domain-p1.dom-1'],
  },
  {
    name: 'a domain being deleted with the old finalizer: the finalizer goes first (the delete follows)',
    domain: da(
      { appName: 'alpha' },
      { deletionTimestamp: '2026-01-03T00:00:00Z', finalizers: [LEGACY_FINALIZER] },
    ),
    ingress: makeIngress(da({ appName: 'alpha' }), settings, gatewayService),
    wantWrites: ['patch domainassignments dom-1'],
  },
  {
    name: 'without the gateway Service (being uninstalled): no route, and none made',
    domain: da({ appName: 'alpha' }),
    apps: ['alpha'],
    noGateway: true,
    ingress: makeIngress(da({ appName: 'alpha' }), settings, gatewayService),
    wantWrites: ['delete ingresses domain-p1.dom-1', 'patch-status domainassignments dom-1'],
    wantReason: 'GatewayNotFound',
  },
  {
    name: 'without the gateway Service and no Ingress: nothing is created',
    domain: da({ appName: 'alpha' }),
    apps: ['alpha'],
    noGateway: true,
    wantWrites: ['patch-status domainassignments dom-1'],
    wantReason: 'GatewayNotFound',
  },
];

describe('DomainAssignment reconciler', () => {
  it.each(table)('$name', async (row) => {
    const client = createFakeKubeClient();
    const domains = [row.domain, ...(row.others ?? [])];
    for (const d of domains) client.seed(Resources.DomainAssignment, d as unknown as KubeObject);
    if (row.ingress) client.seed(Resources.Ingress, row.ingress);
    const reconcile = createDomainReconciler({
      domains: {
        get: (_ns, name) => domains.find((d) => d.metadata.name === name),
        list: () => domains,
      },
      apps: { get: (_ns, name) => (row.apps?.includes(name) ? app(name) : undefined) },
      ingresses: { get: (_ns, name) => (row.ingress?.metadata.name === name ? row.ingress : undefined) },
      gatewayService: () => (row.noGateway ? undefined : gatewayService),
      client,
      events: createFakeEventRecorder(),
      settings,
      clock,
      log: silentLogger(),
    });
    await reconcile('p1/dom-1');
    expect(client.writes.map((w) => `${w.verb} ${w.resource} ${w.name}`)).toEqual(row.wantWrites);
    if (row.wantReason) {
      const st = client.stored(Resources.DomainAssignment, { namespace: 'p1', name: 'dom-1' })?.status as
        | DomainAssignment['status']
        | undefined;
      expect(st?.conditions?.[0]?.reason).toBe(row.wantReason);
    }
  });

  it("the old finalizer's removal leaves others' and is a compare-and-swap", async () => {
    const client = createFakeKubeClient();
    const d = da({ appName: '' }, { deletionTimestamp: 'x', finalizers: ['other', LEGACY_FINALIZER] });
    client.seed(Resources.DomainAssignment, d as unknown as KubeObject);
    await createDomainReconciler({
      domains: { get: () => d, list: () => [d] },
      apps: { get: () => undefined },
      ingresses: { get: () => undefined },
      gatewayService: () => gatewayService,
      client,
      events: createFakeEventRecorder(),
      settings,
      clock,
      log: silentLogger(),
    })('p1/dom-1');
    expect(client.writes.at(-1)?.body).toEqual({ metadata: { finalizers: ['other'], resourceVersion: '5' } });
  });
});

describe("an Ingress of the same name that is not this domain's", () => {
  const foreign: Ingress = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'Ingress',
    metadata: { name: 'domain-p1.dom-1', namespace: 'gw' },
    spec: { rules: [{ host: 'other.example.com' }] },
  };
  const run = async (d: DomainAssignment) => {
    const client = createFakeKubeClient();
    client.seed(Resources.DomainAssignment, d as unknown as KubeObject);
    client.seed(Resources.Ingress, foreign);
    const reconcile = createDomainReconciler({
      domains: { get: () => d, list: () => [d] },
      apps: { get: (_ns, name) => app(name) },
      // Unlabelled, so not in our cache: only a lookup finds it.
      ingresses: { get: () => undefined },
      gatewayService: () => gatewayService,
      client,
      events: createFakeEventRecorder(),
      settings,
      clock,
      log: silentLogger(),
    });
    return { client, result: reconcile('p1/dom-1') };
  };

  it('is not taken over', async () => {
    const { client, result } = await run(da({ appName: 'alpha' }));
    await expect(result).rejects.toThrow(/already exists in namespace gw and is not this domain's/);
    expect(client.writes.map((w) => w.verb)).toEqual(['patch-status']);
  });

  it('is not deleted when the domain goes', async () => {
    const { client, result } = await run(da({ appName: 'alpha' }, { deletionTimestamp: 'x' }));
    await result;
    expect(client.writes).toEqual([]);
  });
});

describe('makeIngress', () => {
  it('routes the hostname to the gateway, with TLS and class when set', () => {
    const ing = makeIngress(
      da({ appName: 'alpha', tlsSecretName: 'tls-1' }),
      { ...settings, ingressClass: 'nginx' },
      gatewayService,
    );
    // Owned by the gateway Service (uninstalling the platform takes the route along), not blocking it.
    expect(ing.metadata.ownerReferences).toEqual([
      { apiVersion: 'v1', kind: 'Service', name: 'gateway', uid: 'gw-uid' },
    ]);
    expect(ing.metadata.namespace).toBe('gw');
    expect(ing.spec).toEqual({
      ingressClassName: 'nginx',
      tls: [{ hosts: ['api.example.com'], secretName: 'tls-1' }],
      rules: [
        {
          host: 'api.example.com',
          http: {
            paths: [
              {
                path: '/',
                pathType: 'Prefix',
                backend: { service: { name: 'gateway', port: { number: 80 } } },
              },
            ],
          },
        },
      ],
    });
  });

  it('names are unambiguous: namespace a-b + name c differs from namespace a + name b-c', () => {
    expect(ingressName({ metadata: { namespace: 'a-b', name: 'c' } })).not.toBe(
      ingressName({ metadata: { namespace: 'a', name: 'b-c' } }),
    );
  });

  it('names stay valid and unique when long', () => {
    const long = { metadata: { namespace: 'n'.repeat(63), name: 'd'.repeat(253) } };
    const name = ingressName(long);
    expect(name.length).toBeLessThanOrEqual(253);
    expect(name).not.toBe(
      ingressName({ metadata: { namespace: 'n'.repeat(63), name: `${'d'.repeat(252)}e` } }),
    );
  });
});
