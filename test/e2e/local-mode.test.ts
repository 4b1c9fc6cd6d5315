/**
 * `apphost dev` end to end, as a newcomer runs it: a child process against (a copy of) examples/apps,
 * with its own auto-started NATS and free ports; sync, SSE, async + signed webhook to a loopback
 * receiver, custom-domain routing and unassignment, a code change picked up, and SIGTERM leaving no
 * process behind.
 */
import { createHmac } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, request, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  alive,
  type Credentials,
  type DevProcess,
  descendants,
  REPO,
  startDevProcess,
  TEST_DATA_PLANE,
  until,
} from './dev-process.ts';

interface Delivery {
  headers: IncomingHttpHeaders;
  body: string;
}

describe('apphost dev (e2e)', () => {
  let dir: string;
  let appsDir: string;
  let dev: DevProcess;
  let creds: Credentials;
  let receiver: Server;
  let receiverUrl: string;
  const deliveries: Delivery[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'apphost-e2e-local-'));
    appsDir = join(dir, 'apps');
    cpSync(join(REPO, 'examples', 'apps'), appsDir, { recursive: true });

    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        deliveries.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const addr = receiver.address();
    receiverUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}/hook`;

    dev = await startDevProcess({
      appsDir,
      stateDir: join(dir, 'state'),
      credentialsFile: join(dir, 'credentials.json'),
    });
    creds = dev.creds;
  });

  afterAll(async () => {
    dev?.kill();
    await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const run = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${creds.api_url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${creds.run_token}`,
        'content-type': 'application/json',
        ...headers,
      },
      body: JSON.stringify(body),
    });

  it('prints the banner with the loopback-webhook note and writes the credentials', () => {
    expect(creds.project_id).toBe('local');
    expect(creds.api_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(creds.base_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(dev.output()).toContain(
      'Webhooks to loopback addresses (127.0.0.0/8, ::1) are ALLOWED in local mode',
    );
    expect(dev.output()).toMatch(/^\[hello\] /m);
  });

  it('calls hello synchronously', async () => {
    const res = await run(`/v4/${creds.project_id}/hello/run`, { name: 'e2e' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBeTruthy();
    expect(await res.json()).toEqual({ message: 'hello e2e' });
  });

  it('rejects a call without a valid run token', async () => {
    const res = await fetch(`${creds.api_url}/v4/${creds.project_id}/hello/run`, {
      method: 'POST',
      headers: { authorization: 'Bearer nope', 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(401);
  });

  it('streams the generator as server-sent events', async () => {
    const res = await run(
      `/v4/${creds.project_id}/stream/run`,
      { count: 3, delay: 0.05 },
      { accept: 'text/event-stream' },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await res.text();
    const events = text
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => JSON.parse(e.slice('data: '.length)) as { n: number });
    expect(events.map((e) => e.n)).toEqual([1, 2, 3]);
  });

  it('runs slow asynchronously and forwards the signed result to a loopback webhook', async () => {
    const secret = 'e2e-webhook-secret';
    const res = await run(
      `/v4/${creds.project_id}/slow/run?async=true&webhookEndpoint=${encodeURIComponent(receiverUrl)}`,
      { seconds: 1, label: 'e2e' },
      { 'x-webhook-secret': secret },
    );
    expect(res.status).toBe(202);
    const body = (await res.json()) as { run_id: string };
    expect(Object.keys(body)).toEqual(['run_id']);
    expect(body.run_id).toBe(res.headers.get('x-request-id'));

    const delivery = await until(
      'the webhook delivery',
      () => deliveries.find((d) => d.headers['x-request-id'] === body.run_id),
      60_000,
    );
    expect(delivery.body).toContain('"e2e"');
    const ts = String(delivery.headers['x-service-webhook-timestamp']);
    const sig = String(delivery.headers['x-service-webhook-signature']);
    const want = createHmac('sha256', secret)
      .update(`${body.run_id}.${ts}.${delivery.body}`, 'utf8')
      .digest('hex');
    expect(sig).toBe(`v1,${want}`);
  });

  it('routes a custom domain until it is unassigned through the management API', async () => {
    // fetch() may not set Host, so this call goes through node:http.
    const viaDomain = (path = '/run') =>
      new Promise<{ status: number; body: string }>((done, fail) => {
        const body = JSON.stringify({ name: 'domain' });
        const req = request(
          `${creds.api_url}${path}`,
          {
            method: 'POST',
            headers: {
              host: 'hello.localhost',
              authorization: `Bearer ${creds.run_token}`,
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(body),
            },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () =>
              done({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }),
            );
          },
        );
        req.on('error', fail);
        req.end(body);
      });
    const before = await viaDomain();
    expect(before.status).toBe(200);
    expect(JSON.parse(before.body)).toEqual({ message: 'hello domain' });
    // The whole path goes to the domain's app, a /v4 one too: hello has no function 'v4/local/stream/run'.
    // (With native, the data plane must hand the host to Node rather than serve /v4/local/stream/run.)
    for (let i = 0; i < 2; i++)
      expect((await viaDomain(`/v4/${creds.project_id}/stream/run`)).status).toBe(404);

    const unassign = await fetch(
      `${creds.base_url}/v2/projects/${creds.project_id}/domains/hello-local/assign`,
      {
        method: 'DELETE',
        headers: { authorization: `Bearer ${creds.service_account_token}` },
      },
    );
    expect(unassign.status).toBe(200);

    const after = await viaDomain();
    expect(after.status).toBe(404);
  });

  it.runIf(TEST_DATA_PLANE === 'native')(
    'serves repeated calls in the native data plane, handing none to Node',
    async () => {
      const ops = /ops\s+(http:\/\/\S+)/.exec(dev.output())?.[1];
      expect(ops).toBeDefined();
      const handoffs = async () => {
        const text = await (await fetch(`${ops}/metrics`)).text();
        expect(text).toMatch(/^apphost_gateway_dataplane_up 1$/m);
        return [...text.matchAll(/^apphost_gateway_dataplane_handoffs_total\{[^}]*\} (\d+)$/gm)].reduce(
          (sum, m) => sum + Number(m[1]),
          0,
        );
      };
      // The calls the data plane served, in /metrics as node mode counts them (design §5).
      const served = async () => {
        const text = await (await fetch(`${ops}/metrics`)).text();
        const line = new RegExp(
          `^apphost_gateway_requests_total\\{project="${creds.project_id}",app="hello",mode="sync",status="200"\\} (\\d+)$`,
          'm',
        );
        return Number(line.exec(text)?.[1] ?? 0);
      };
      // The token is known from the calls above: each call below is served by the data plane itself.
      expect((await run(`/v4/${creds.project_id}/hello/run`, { name: 'a' })).status).toBe(200);
      const before = await handoffs();
      const servedBefore = await served();
      for (let i = 0; i < 5; i++) {
        const res = await run(`/v4/${creds.project_id}/hello/run`, { name: `n${i}` });
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual({ message: `hello n${i}` });
      }
      expect(await handoffs()).toBe(before);
      expect(await served()).toBe(servedBefore + 5);
    },
  );

  it("restarts only the changed app's runtime when its code changes", async () => {
    writeFileSync(
      join(appsDir, 'hello', 'main.py'),
      'def run(name: str = "world") -> dict:\n    return {"message": f"hi again {name}"}\n',
    );
    await until(
      'the new hello code to answer',
      async () => {
        const res = await run(`/v4/${creds.project_id}/hello/run`, { name: 'x' });
        return res.status === 200 && ((await res.json()) as { message: string }).message === 'hi again x'
          ? true
          : undefined;
      },
      60_000,
    );
    const stream = await run(
      `/v4/${creds.project_id}/stream/run`,
      { count: 1, delay: 0 },
      { accept: 'text/event-stream' },
    );
    expect(stream.status).toBe(200);
    await stream.text();
    // A second version of hello served; stream kept its first process.
    expect(dev.output()).toMatch(
      /"app":"hello","process":"hello@\d+#0".*"msg":"new version serves"[\s\S]*"app":"hello","process":"hello@\d+#0".*"msg":"new version serves"/,
    );
    expect(
      dev.output().match(/"app":"stream","process":"stream@\d+#0".*"msg":"new version serves"/g),
    ).toHaveLength(1);
  });

  it('stops everything it started on SIGTERM', async () => {
    const pids = descendants(dev.child.pid!);
    // nats-server and three runtimes at least
    expect(pids.length).toBeGreaterThanOrEqual(4);
    expect(await dev.stop()).toBe(0);
    await until(
      'every child process to be gone',
      () => (pids.every((p) => !alive(p)) ? true : undefined),
      10_000,
    );
    expect(dev.output()).toContain('"msg":"stopped"');
  });
});
