/**
 * TEST FIXTURE, not a product: the cluster suite's Ingress controller, Caddy driven by a small
 * Ingress → Caddy config sync. Why not a real controller: NGINX's kubernetes-ingress and Zalando's
 * Skipper are refused by the Go module proxy this project builds from (403), and ingress-nginx's Go
 * module builds but its nginx needs Lua libraries Debian does not ship (lua-resty-balancer, -lock,
 * -http, -string, -dns, the stream Lua module). docs/testing.md records this.
 *
 * What it implements of networking.k8s.io/v1 Ingress, and no more: its IngressClass (default class, so
 * Ingresses without a class are served too), host rules (exact and `*.` wildcard), paths (Exact;
 * Prefix and ImplementationSpecific as element-wise prefixes), Service backends by port number or
 * name (to the Service's ClusterIP, through kube-proxy), TLS from `spec.tls` Secrets on :443, and
 * status.loadBalancer. Anything not matched answers 404, as ingress-nginx's default backend does.
 */
import {
  CoreV1Api,
  type KubeConfig,
  NetworkingV1Api,
  type V1Ingress,
  type V1Service,
} from '@kubernetes/client-node';
import { Agent, request } from 'undici';

export const INGRESS_CLASS = 'apphost-test';
export const INGRESS_CONTROLLER = 'apphost.dev/test-caddy-ingress-fixture';
/** How often the sync re-reads Ingresses, Services and Secrets. */
export const INGRESS_SYNC_INTERVAL_MS = 300;

interface Route {
  host: string;
  path: string;
  exact: boolean;
  dial: string;
}

/** Pure: the Caddy routes for `ingresses` given the cluster's Services (by "ns/name"). */
export function ingressRoutes(
  ingresses: V1Ingress[],
  services: Map<string, V1Service>,
  isDefaultClass: boolean,
): Route[] {
  const routes: Route[] = [];
  for (const ing of ingresses) {
    const cls = ing.spec?.ingressClassName;
    if (cls ? cls !== INGRESS_CLASS : !isDefaultClass) continue;
    const ns = ing.metadata?.namespace ?? 'default';
    for (const rule of ing.spec?.rules ?? []) {
      for (const p of rule.http?.paths ?? []) {
        const svc = p.backend.service;
        if (!svc) continue;
        const s = services.get(`${ns}/${svc.name}`);
        const ip = s?.spec?.clusterIP;
        if (!s || !ip || ip === 'None') continue;
        const port =
          svc.port?.number ?? s.spec?.ports?.find((sp) => sp.name === svc.port?.name)?.port ?? undefined;
        if (!port) continue;
        routes.push({
          host: rule.host ?? '',
          path: p.path ?? '/',
          exact: p.pathType === 'Exact',
          dial: `${ip}:${port}`,
        });
      }
    }
  }
  // Most specific first: named hosts before wildcards before any host, then Exact, then longer paths.
  const hostRank = (h: string) => (h === '' ? 2 : h.startsWith('*.') ? 1 : 0);
  return routes.sort(
    (a, b) =>
      hostRank(a.host) - hostRank(b.host) ||
      Number(b.exact) - Number(a.exact) ||
      b.path.length - a.path.length,
  );
}

function caddyRoute(r: Route): unknown {
  const match: Record<string, unknown> = {};
  if (r.host) match.host = [r.host];
  if (r.exact) match.path = [r.path];
  else if (r.path !== '/' && r.path !== '') {
    const base = r.path.replace(/\/+$/, '');
    match.path = [base, `${base}/*`];
  }
  return {
    ...(Object.keys(match).length ? { match: [match] } : {}),
    handle: [{ handler: 'reverse_proxy', upstreams: [{ dial: r.dial }], flush_interval: -1 }],
    terminal: true,
  };
}

const NOT_FOUND = {
  handle: [
    {
      handler: 'static_response',
      status_code: 404,
      headers: { 'Content-Type': ['text/plain'] },
      body: 'default backend - 404\n',
    },
  ],
};

/** Pure: the whole Caddy config (JSON API) for these routes and TLS certificates. */
export function caddyConfig(
  adminSocket: string,
  routes: Route[],
  certs: { certificate: string; key: string }[],
): unknown {
  const handlers = [...routes.map(caddyRoute), NOT_FOUND];
  return {
    admin: { listen: `unix/${adminSocket}` },
    logging: { logs: { default: { level: 'WARN' } } },
    apps: {
      http: {
        servers: {
          http: { listen: [':80'], routes: handlers, automatic_https: { disable: true } },
          ...(certs.length
            ? {
                https: {
                  listen: [':443'],
                  routes: handlers,
                  automatic_https: { disable: true },
                  tls_connection_policies: [{}],
                },
              }
            : {}),
        },
      },
      ...(certs.length ? { tls: { certificates: { load_pem: certs } } } : {}),
    },
  };
}

export interface IngressFixture {
  /** Resolves once the current Ingresses are in Caddy's config. */
  synced(): Promise<void>;
  stop(): void;
}

/**
 * Keeps Caddy's config equal to the cluster's Ingresses. `nodeIp` goes into each served Ingress's
 * status.loadBalancer.
 */
export async function startIngressSync(
  kc: KubeConfig,
  adminSocket: string,
  nodeIp: string,
): Promise<IngressFixture> {
  const net = kc.makeApiClient(NetworkingV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const admin = new Agent({ connect: { socketPath: adminSocket } });
  await net
    .createIngressClass({
      body: {
        metadata: {
          name: INGRESS_CLASS,
          annotations: { 'ingressclass.kubernetes.io/is-default-class': 'true' },
        },
        spec: { controller: INGRESS_CONTROLLER },
      },
    })
    .catch((err) => {
      if (!String(err).includes('409') && !String(err).includes('AlreadyExists')) throw err;
    });
  let last = '';
  let stopped = false;
  let waiters: (() => void)[] = [];
  const once = async () => {
    const [ings, svcs, classes] = await Promise.all([
      net.listIngressForAllNamespaces(),
      core.listServiceForAllNamespaces(),
      net.listIngressClass(),
    ]);
    const isDefault = classes.items.some(
      (c) =>
        c.metadata?.name === INGRESS_CLASS &&
        c.metadata.annotations?.['ingressclass.kubernetes.io/is-default-class'] === 'true',
    );
    const services = new Map(svcs.items.map((s) => [`${s.metadata?.namespace}/${s.metadata?.name}`, s]));
    const routes = ingressRoutes(ings.items, services, isDefault);
    const certs: { certificate: string; key: string }[] = [];
    for (const ing of ings.items) {
      for (const t of ing.spec?.tls ?? []) {
        if (!t.secretName) continue;
        const secret = await core
          .readNamespacedSecret({ name: t.secretName, namespace: ing.metadata?.namespace ?? 'default' })
          .catch(() => undefined);
        const crt = secret?.data?.['tls.crt'];
        const key = secret?.data?.['tls.key'];
        if (crt && key) {
          certs.push({
            certificate: Buffer.from(crt, 'base64').toString(),
            key: Buffer.from(key, 'base64').toString(),
          });
        }
      }
    }
    const config = JSON.stringify(caddyConfig(adminSocket, routes, certs));
    if (config !== last) {
      const res = await request('http://caddy/load', {
        method: 'POST',
        dispatcher: admin,
        headers: { 'content-type': 'application/json' },
        body: config,
      });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`caddy /load: ${res.statusCode} ${text}`);
      last = config;
    }
    for (const ing of ings.items) {
      const served = ingressRoutes([ing], services, isDefault).length > 0;
      const has = ing.status?.loadBalancer?.ingress?.some((i) => i.ip === nodeIp);
      if (served && !has && ing.metadata?.name && ing.metadata.namespace) {
        await net
          .patchNamespacedIngressStatus({
            name: ing.metadata.name,
            namespace: ing.metadata.namespace,
            body: [
              { op: 'replace', path: '/status', value: { loadBalancer: { ingress: [{ ip: nodeIp }] } } },
            ],
          })
          .catch(() => {});
      }
    }
  };
  await once();
  const loop = async () => {
    while (!stopped) {
      await new Promise((r) => setTimeout(r, INGRESS_SYNC_INTERVAL_MS));
      if (stopped) break;
      try {
        await once();
      } catch {
        // The API server or Caddy is briefly unavailable (e.g. during teardown): try again next round.
      }
      const w = waiters;
      waiters = [];
      for (const f of w) f();
    }
  };
  void loop();
  return {
    synced: () =>
      new Promise<void>((resolve) => {
        // A whole round that started after this call.
        let rounds = 0;
        const tick = () => {
          rounds++;
          if (rounds >= 2) resolve();
          else waiters.push(tick);
        };
        waiters.push(tick);
      }),
    stop: () => {
      stopped = true;
      void admin.close();
    },
  };
}
