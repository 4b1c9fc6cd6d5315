/**
 * Load reports of the calls the native data plane serves (design §4, step 7): Node's balancer never sees
 * them, so without the data plane's `load` frame the autoscaler would read a busy app as idle. Real
 * runtime, real NATS, the real data plane binary in front of the gateway, and the autoscaler's own loop
 * reading the reports (its fleet a fake that records the decision).
 */
import type { Server } from 'node:http';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { effectiveScaling } from '../../../src/apis/v1alpha1/scaling.ts';
import {
  type AutoscaledApp,
  type AutoscalerLoop,
  createAutoscalerLoop,
} from '../../../src/autoscaler/loop.ts';
import { createBalancer, DEFAULT_BALANCER_SETTINGS } from '../../../src/gateway/balancer/balancer.ts';
import { createLoadReporter, type LoadReporter } from '../../../src/gateway/balancer/reporter.ts';
import { createGateway, type Gateway } from '../../../src/gateway/gateway.ts';
import { DEFAULT_GATEWAY_SETTINGS } from '../../../src/gateway/settings.ts';
import { LOAD_SUBJECTS, type LoadReport } from '../../../src/shared/contracts/scaling.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { createRunTokenVerifier, generateSigningKey, issueRunToken } from '../../../src/shared/run-tokens.ts';
import { createSecretBox } from '../../../src/shared/secretbox.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';
import { waitFor } from '../../harness/process.ts';
import { FAST_AUTOSCALER_SETTINGS } from '../autoscaler/fast-settings.ts';
import { noCargo } from './dataplane-binary.ts';
import {
  closeServer,
  frontGateway,
  frontVerifier,
  type Runtime,
  resolvedApp,
  startRuntime,
  staticResolver,
} from './helpers.ts';

const P = 'proj-load';
/** The reports' interval here (the setting's minimum), so a few seconds of calls are many reports. */
const INTERVAL_MS = 100;
/** Bound on the autoscaler deciding from the reports (a busy machine). */
const DECISION_TIMEOUT_MS = 15_000;
const skip = noCargo();

let nats: NatsServer;
let nc: NatsConnection;
let runtime: Runtime;
let gateway: Gateway;
let server: Server;
let base: string;
let token: string;
let reporter: LoadReporter;
const resolver = staticResolver([]);

beforeAll(async () => {
  if (skip) return;
  let keys: Awaited<ReturnType<typeof generateSigningKey>>;
  [nats, runtime, keys] = await Promise.all([startNats(), startRuntime(), generateSigningKey()]);
  nc = await connect({ servers: nats.url });
  token = await issueRunToken({ keys: [keys] }, P, new Date(Date.now() + 3600_000));
  resolver.apps.push(resolvedApp(P, 'busy', runtime.url, { functions: ['sleep', 'echo'] }));
  const verifier = frontVerifier(
    createRunTokenVerifier(() => ({ keys: [keys] })),
    'native',
  );
  // As serve.ts wires a gateway process: one balancer, its load reporter, the data plane's loads
  // published through the same reporter as `<reporter>-dp`.
  const balancer = createBalancer(DEFAULT_BALANCER_SETTINGS);
  reporter = createLoadReporter({ nc, log: silentLogger(), intervalMs: INTERVAL_MS });
  reporter.start(balancer);
  gateway = createGateway({
    resolver,
    verifyRunToken: verifier,
    nc,
    secretBox: createSecretBox('test-platform-key-0123456789'),
    log: silentLogger(),
    registry: new Registry(),
    settings: DEFAULT_GATEWAY_SETTINGS,
    balancer,
  });
  const l = await frontGateway(gateway, {
    resolver,
    verifier,
    mode: 'native',
    publishLoad: (apps) => reporter.publish(apps),
    loadReportIntervalMs: INTERVAL_MS,
  });
  server = l.server;
  base = l.url;
});

afterAll(async () => {
  reporter?.stop();
  if (server) await closeServer(server);
  await gateway?.close();
  await nc?.close();
  await runtime?.proc.stop(5_000);
  await nats?.stop();
});

const run = async (path: string, body: string) => {
  const res = await fetch(`${base}/v4/${P}/${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body,
  });
  await res.arrayBuffer();
  return res.status;
};

/** `callers` loops of sleeping calls until `until` resolves; their statuses. */
async function sustained(callers: number, until: Promise<unknown>): Promise<number[]> {
  let done = false;
  const stop = () => {
    done = true;
  };
  until.then(stop, stop);
  const statuses: number[] = [];
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (!done) statuses.push(await run('busy/sleep', '{"seconds": 0.2}'));
    }),
  );
  return statuses;
}

describe.skipIf(!!skip)(
  `load reports of the calls the data plane serves${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    it('reach the autoscaler as reporter <reporter>-dp, and a busy app is scaled up', async () => {
      // The first call of the token is verified by Node (handed off); every call after is served in Rust.
      expect(await run('busy/echo', '{}')).toBe(200);
      // Past Node's report of that call.
      await new Promise((r) => setTimeout(r, 3 * INTERVAL_MS));

      const reports: LoadReport[] = [];
      const sub = nc.subscribe(LOAD_SUBJECTS, {
        callback: (_, msg) => void reports.push(msg.json<LoadReport>()),
      });
      const scaling = effectiveScaling({
        minReplicas: 1,
        maxReplicas: 5,
        replicaConcurrency: 1,
        targetUtilization: 100,
        cooldownSeconds: 0,
      });
      const app: AutoscaledApp = { key: `${P}/busy`, scaling, readyReplicas: 1, desiredReplicas: 1 };
      const decisions: number[] = [];
      const loop: AutoscalerLoop = createAutoscalerLoop({
        nc,
        log: silentLogger(),
        settings: FAST_AUTOSCALER_SETTINGS,
        apps: () => [app],
        app: (key) => (key === app.key ? app : undefined),
        async scale(a, d) {
          decisions.push(d.replicas);
          a.desiredReplicas = d.replicas;
          a.readyReplicas = d.replicas;
        },
        active: () => true,
      });
      await loop.start();
      try {
        // Two callers, each with a call in flight most of the time: about 2 replicas' worth at concurrency 1.
        const scaled = waitFor(
          'the busy app scaled up',
          async () => app.desiredReplicas >= 2,
          DECISION_TIMEOUT_MS,
        );
        const statuses = await sustained(2, scaled);
        await scaled;
        expect(new Set(statuses)).toEqual(new Set([200]));
      } finally {
        await loop.stop();
        sub.unsubscribe();
      }
      const dp = `${reporter.reporter}-dp`;
      const busy = reports.filter((r) => r.reporter === dp).flatMap((r) => r.apps);
      expect(busy.some((a) => a.appName === 'busy' && a.concurrency > 0 && a.inflight >= 0)).toBe(true);
      expect(reports.find((r) => r.reporter === dp)?.intervalMs).toBe(INTERVAL_MS);
      // Node's own reporter saw none of those calls (only the handed-off first one, long before).
      const node = reports.filter((r) => r.reporter === reporter.reporter).flatMap((r) => r.apps);
      expect(node.filter((a) => a.concurrency > 0)).toEqual([]);
      expect(decisions.at(-1)).toBeGreaterThanOrEqual(2);
    });
  },
);
