/**
 * apphost as a platform team installs it (helm install, global-setup.ts) and as a user calls it:
 * through the cluster's ingress, with the Host a user would send, to pods running the images
 * `make images` built.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import { AppsV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../harness/process.ts';
import { Browser } from '../integration/dashboard/server.ts';
import {
  clusterKubeConfig,
  createProject,
  exposeToPods,
  ingressDispatcher,
  ingressRequest,
  kubectl,
  PLATFORM_NAMESPACE,
} from './fixture.ts';
import { API_HOST, MANAGEMENT_HOST } from './platform.ts';
import { call, deployConfigMapApp, firstOk, management, runToken, serviceAccountToken } from './user.ts';

/** Bound on a webhook delivery or a domain route change becoming visible. */
const CONVERGE_MS = 60_000;

describe('apphost installed with helm on a real cluster', () => {
  let kc: KubeConfig;
  let project: string;
  let saToken: string;
  let token: string;

  beforeAll(async () => {
    kc = clusterKubeConfig();
    project = await createProject(kc);
    saToken = await serviceAccountToken(project);
    token = await runToken(project, saToken);
  });

  afterAll(async () => {
    await kubectl('delete', 'namespace', project, '--wait=false').catch(() => {});
  });

  it('runs every platform piece Ready, with the chart probes', async () => {
    const apps = kc.makeApiClient(AppsV1Api);
    const deployments = await apps.listNamespacedDeployment({ namespace: PLATFORM_NAMESPACE });
    const names = deployments.items.map((d) => d.metadata?.name).sort();
    expect(names).toEqual(['apphost-gateway', 'apphost-management', 'apphost-operator', 'apphost-webhooks']);
    for (const d of deployments.items) {
      expect(d.status?.readyReplicas, d.metadata?.name).toBe(d.spec?.replicas);
      expect(d.spec?.template.spec?.containers[0]?.readinessProbe?.httpGet?.path).toBe('/readyz');
    }
    const nats = await apps.readNamespacedStatefulSet({
      name: 'apphost-nats',
      namespace: PLATFORM_NAMESPACE,
    });
    // The chart's default: three servers clustered over routes (a JetStream quorum), all ready.
    expect(nats.spec?.replicas).toBe(3);
    expect(nats.status?.readyReplicas).toBe(3);
  });

  it('brought every platform pod up without a restart (issue 21.3: no crash loop while NATS or the key Secret is not there yet)', async () => {
    const pods = await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: PLATFORM_NAMESPACE });
    const restarted = pods.items
      .flatMap((p) =>
        (p.status?.containerStatuses ?? []).map((c) => [p.metadata?.name, c.restartCount] as const),
      )
      .filter(([, n]) => n > 0);
    expect(restarted).toEqual([]);
    expect(pods.items.length).toBeGreaterThanOrEqual(10);
  });

  it('serves a sync call of an App through the ingress', async () => {
    const t0 = Date.now();
    await deployConfigMapApp(project, 'hello', 'hello');
    // Issue 21.6: the first call after the App reports Ready succeeds (no 502 while routes settle).
    const res = await call(token, `/v4/${project}/hello/run`, { name: 'cluster' });
    const body = await res.body.text();
    process.stderr.write(
      `cluster suite: App created → first 200 through the ingress ${Date.now() - t0} ms\n`,
    );
    expect(res.statusCode, body).toBe(200);
    expect(JSON.parse(body)).toEqual({ message: 'hello cluster' });
  });

  it("returns the app pods' log lines through the management API, with the call's request id and the pod as replica", async () => {
    const res = await call(token, `/v4/${project}/hello/run`, { name: 'logs' });
    await res.body.text();
    expect(res.statusCode).toBe(200);
    const requestId = String(res.headers['x-request-id']);
    type Line = { replica: string; stream: string; message: string; request_id?: string };
    let mine: Line[] = [];
    await waitFor(
      "the call's log line",
      async () => {
        const r = await management(saToken, 'GET', `/v2/projects/${project}/apps/hello/logs?since=10m`);
        expect(r.status, r.text).toBe(200);
        mine = (r.body as { lines: Line[] }).lines.filter((l) => l.request_id === requestId);
        return mine.length > 0;
      },
      CONVERGE_MS,
      500,
    );
    const pods = await kc
      .makeApiClient(CoreV1Api)
      .listNamespacedPod({ namespace: project, labelSelector: 'apphost.dev/app=hello' });
    const podNames = pods.items.map((p) => p.metadata?.name);
    for (const line of mine) expect(podNames).toContain(line.replica);

    // follow=true: the lines there are, then a new call's line as the pod writes it.
    const follow = await ingressRequest(
      MANAGEMENT_HOST,
      `/v2/projects/${project}/apps/hello/logs?follow=true&tail=1`,
      {
        headers: { authorization: `Bearer ${saToken}`, accept: 'text/event-stream' },
      },
    );
    expect(follow.statusCode).toBe(200);
    expect(follow.headers['content-type']).toMatch(/^text\/event-stream/);
    const next = await call(token, `/v4/${project}/hello/run`, { name: 'follow' });
    await next.body.text();
    const nextId = String(next.headers['x-request-id']);
    let seen = '';
    const deadline = Date.now() + CONVERGE_MS;
    for await (const chunk of follow.body) {
      seen += String(chunk);
      if (seen.includes(nextId) || Date.now() > deadline) break;
    }
    follow.body.destroy();
    expect(seen).toContain(nextId);
  });

  it("serves the dashboard through the ingress: sign in with a service-account token, the App listed with the chart's public URL", async () => {
    const viaIngress = ((url: string, init?: RequestInit) =>
      undiciFetch(url, {
        ...(init as Parameters<typeof undiciFetch>[1]),
        dispatcher: ingressDispatcher(),
      })) as unknown as typeof fetch;
    const browser = new Browser(`http://${MANAGEMENT_HOST}`, viaIngress);
    // The first request on a fresh connection through the ingress fixture has answered 502 (2 of 4 runs):
    // wait, bounded, for the sign-in page as firstOk does for apps; a lasting failure still fails here.
    let form = { status: 0, text: '' };
    await waitFor(
      'the sign-in page through the ingress',
      async () => {
        form = await browser.get('/dashboard/sign-in');
        return form.status === 200;
      },
      CONVERGE_MS,
      500,
    ).catch(() => undefined);
    expect(form.status, form.text.slice(0, 500)).toBe(200);
    const signIn = await browser.signIn(saToken);
    expect(signIn.status, signIn.text).toBe(303);
    expect(signIn.location).toBe('/dashboard/apps');
    const apps = await browser.get('/dashboard/apps');
    expect(apps.status).toBe(200);
    expect(apps.text).toContain(`http://${API_HOST}/v4/${project}/hello`);
    const page = await browser.get('/dashboard/apps/hello');
    expect(page.status).toBe(200);
    expect(page.text).toContain(`http://${API_HOST}/v4/${project}/hello`);
    expect(page.text).not.toContain('{api_url}');
  });

  it('streams server-sent events through the ingress as they are yielded', async () => {
    await deployConfigMapApp(project, 'stream', 'stream');
    await firstOk(token, `/v4/${project}/stream/run`, { count: 1, delay: 0 });
    const res = await call(
      token,
      `/v4/${project}/stream/run`,
      { count: 4, delay: 0.5 },
      { accept: 'text/event-stream' },
    );
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    // Progressive: the first event arrives in a chunk of its own, before the last one exists.
    const chunks: string[] = [];
    for await (const chunk of res.body) chunks.push(String(chunk));
    const all = chunks.join('');
    const events = all.split('\n\n').filter((e) => e.includes('data:'));
    expect(events.map((e) => JSON.parse(e.slice(e.indexOf('data:') + 5).trim()).n)).toEqual([1, 2, 3, 4]);
    const firstChunk = chunks.findIndex((c) => c.includes('"n": 1') || c.includes('"n":1'));
    const lastChunk = chunks.findIndex((c) => c.includes('"n": 4') || c.includes('"n":4'));
    expect(lastChunk).toBeGreaterThan(firstChunk);
  });

  it('delivers an async run result to a signed webhook receiver', async () => {
    await deployConfigMapApp(project, 'slow', 'slow');
    await firstOk(token, `/v4/${project}/slow/run`, { seconds: 0 });
    const deliveries: { headers: IncomingMessage['headers']; body: Buffer }[] = [];
    const receiver = createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (d: Buffer) => parts.push(d));
      req.on('end', () => {
        deliveries.push({ headers: req.headers, body: Buffer.concat(parts) });
        res.writeHead(200).end();
      });
    });
    const exposed = await exposeToPods(receiver);
    try {
      const secret = 'e2e-signing-secret';
      const res = await call(
        token,
        `/v4/${project}/slow/run?async=true&webhookEndpoint=${encodeURIComponent(`${exposed.url}/hook`)}`,
        { seconds: 1, label: 'async-e2e' },
        { 'x-webhook-secret': secret },
      );
      const accepted = (await res.body.json()) as { run_id: string };
      expect(res.statusCode).toBe(202);
      await waitFor('the webhook delivery', async () => deliveries.length > 0, CONVERGE_MS, 200);
      const d = deliveries[0] as (typeof deliveries)[number];
      expect(d.headers['x-request-id']).toBe(accepted.run_id);
      const ts = String(d.headers['x-service-webhook-timestamp']);
      const sig = String(d.headers['x-service-webhook-signature']);
      const expected = createHmac('sha256', secret)
        .update(Buffer.concat([Buffer.from(`${accepted.run_id}.${ts}.`), d.body]))
        .digest();
      expect(sig.startsWith('v1,')).toBe(true);
      expect(timingSafeEqual(Buffer.from(sig.slice(3), 'hex'), expected)).toBe(true);
      const envelope = JSON.parse(d.body.toString());
      expect(envelope).toMatchObject({
        run_id: accepted.run_id,
        status: 'success',
        response: { label: 'async-e2e', slept_seconds: 1 },
      });
    } finally {
      await exposed.close();
    }
  });

  it("routes a DomainAssignment's hostname to its app, and 404s it once unassigned (§4.1)", async () => {
    const hostname = `${project}.domains.apphost.test`;
    const created = await management(saToken, 'POST', `/v2/projects/${project}/domains`, { hostname });
    expect(created.status, created.text).toBe(201);
    const id = (created.body as { domain_id: string }).domain_id;
    const assigned = await management(saToken, 'PUT', `/v2/projects/${project}/domains/${id}/assign`, {
      app_name: 'hello',
    });
    expect(assigned.status, assigned.text).toBe(200);
    let last = '';
    await waitFor(
      `${hostname} routed to hello`,
      async () => {
        const res = await call(token, '/run', { name: 'domain' }, {}, hostname);
        last = `${res.statusCode} ${await res.body.text()}`;
        return res.statusCode === 200;
      },
      CONVERGE_MS,
      250,
    ).catch((err) => {
      throw new Error(`${err}; last ${last}`);
    });
    expect(JSON.parse(last.slice(4))).toEqual({ message: 'hello domain' });

    const unassigned = await management(saToken, 'DELETE', `/v2/projects/${project}/domains/${id}/assign`);
    expect(unassigned.status, unassigned.text).toBe(200);
    await waitFor(
      `${hostname} answers 404`,
      async () => (await call(token, '/run', { name: 'domain' }, {}, hostname)).statusCode === 404,
      CONVERGE_MS,
      250,
    );
    // The app itself stays reachable at its /v4 path.
    const direct = await ingressRequest('api.apphost.test', `/v4/${project}/hello/run`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(direct.statusCode).toBe(200);
    await direct.body.dump();
  });
});
