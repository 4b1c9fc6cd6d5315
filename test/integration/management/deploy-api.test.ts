/**
 * The apps and builds routes of the management API on the real deploy pipeline (NATS, pip, the Python
 * runtime as local processes): a deploy is followed to `ready`; every bad bundle and bad config is a 400
 * (or 413/415) naming the problem, with nothing stored and the serving version untouched; responses
 * validate against the OpenAPI document.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { Objm } from '@nats-io/obj';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parseAppConfig } from '../../../src/apis/v1alpha1/app-config.ts';
import { sha256Digest } from '../../../src/builds/archive.ts';
import { ARTIFACTS_BUCKET } from '../../../src/builds/artifact-store.ts';
import { DEFAULT_BUNDLE_LIMITS, packBundle } from '../../../src/builds/bundle.ts';
import { sseEvents } from '../../../src/cli/sse.ts';
import { type LocalDeploys, startLocalDeploys } from '../../../src/local/deploys.ts';
import { nodeSpawner, trackingSpawner } from '../../../src/local/spawner.ts';
import { createSupervisor } from '../../../src/local/supervisor.ts';
import { openApiDocument } from '../../../src/management/openapi.ts';
import { createServiceAccount } from '../../../src/management/service-accounts.ts';
import { createMemoryStore } from '../../../src/management/store/memory.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { type Raw, rawTarGz } from '../../harness/tarball.ts';
import { PYTHON } from '../gateway/helpers.ts';
import { memoryDeliveries, memoryRuns } from './fixtures.ts';
import { call, type RunningApi, startApi } from './server.ts';

const P = `dapi${Date.now().toString(36)}`;
const LIMITS = { ...DEFAULT_BUNDLE_LIMITS, maxBytes: 200_000, maxUnpackedBytes: 1_000_000, maxFiles: 50 };
const spawner = trackingSpawner(nodeSpawner);
const supervisor = createSupervisor({ spawner, log: silentLogger(), output: () => {} });
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
let root: string;
let nc: NatsConnection;
let deploys: LocalDeploys;
let api: RunningApi;
let token: string;
let otherToken: string;
let schema: (name: string) => ValidateFunction;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'apphost-deploy-api-'));
  nc = await connect({ servers: inject('natsUrl') });
  const store = createMemoryStore({ projects: { [P]: [], other: [] } });
  deploys = await startLocalDeploys({
    natsUrl: inject('natsUrl'),
    projectId: P,
    python: PYTHON,
    env: { ...process.env, PIP_NO_INDEX: '1', PIP_CONFIG_FILE: '/dev/null' },
    stateDir: join(root, 'state'),
    supervisor,
    log: silentLogger(),
    output: () => {},
    onAppAdded: (name, spec) => store.addApp(P, name, spec),
    onAppRemoved: (name) => store.removeApp(P, name),
    bundleLimits: LIMITS,
  });
  api = await startApi({
    store,
    runs: memoryRuns(),
    deliveries: memoryDeliveries(),
    deploy: {
      deployments: deploys.deployments,
      builds: deploys.builds,
      logs: deploys.logs,
      target: deploys.target,
      apiUrl: 'http://api.example.test',
    },
  });
  const soon = new Date(Date.now() + 30 * 86_400_000);
  token = (await createServiceAccount(store, P, 'ci', soon)).token;
  otherToken = (await createServiceAccount(store, 'other', 'ci', soon)).token;
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema(openApiDocument(), 'openapi');
  schema = (name) => ajv.getSchema(`openapi#/components/schemas/${name}`) as ValidateFunction;
});

afterAll(async () => {
  await api?.close();
  await deploys?.stop();
  await supervisor.stopAll();
  spawner.killAll();
  await nc?.drain();
  rmSync(root, { recursive: true, force: true });
});

const valid = (name: string, body: unknown) => {
  const v = schema(name);
  expect(v(body), JSON.stringify(v.errors)).toBe(true);
};

async function upload(
  data: Buffer,
  opts: { token?: string; type?: string; headers?: Record<string, string>; project?: string } = {},
) {
  const res = await fetch(`${api.url}/v2/projects/${opts.project ?? P}/apps`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${opts.token ?? token}`,
      'content-type': opts.type ?? 'application/gzip',
      ...opts.headers,
    },
    body: data,
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: text ? (JSON.parse(text) as View) : undefined,
  };
}

async function folderBundle(files: Record<string, string>): Promise<Buffer> {
  const dir = mkdtempSync(join(root, 'app-'));
  for (const [p, t] of Object.entries(files)) writeFileSync(join(dir, p), t);
  return (await packBundle(dir, parseAppConfig(files['apphost.toml'] ?? ''), DEFAULT_BUNDLE_LIMITS)).data;
}

/** Follows a build's log as SSE until `end`; the lines and the final build. */
async function follow(logPath: string) {
  const res = await fetch(`${api.url}${logPath}?follow=true`, {
    headers: { authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(120_000),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const lines: string[] = [];
  for await (const e of sseEvents(res.body as ReadableStream<Uint8Array>)) {
    if (e.event === 'log') lines.push((JSON.parse(e.data) as { text: string }).text);
    if (e.event === 'end') return { lines, end: JSON.parse(e.data) as { reason: string; build: View } };
  }
  throw new Error('the stream ended without an end event');
}

async function callApp(): Promise<unknown> {
  const ep = deploys.host.endpoint('shop');
  const res = await fetch(`http://127.0.0.1:${ep?.port}/run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  return res.json();
}

/** What the tests read of the API's answers (the OpenAPI schemas check the rest). */
interface View {
  build_id: string;
  state: string;
  bundle: { digest: string };
  links: { self: string; log: string };
  build: View;
  error: {
    code: string;
    message: string;
    problem?: string;
    limit_bytes?: number;
    problems?: Array<{ path: string }>;
  };
}

const TOML = '[app]\nname = "shop"\n';
const MAIN = 'def run():\n    return "v1"\n';

describe('deploy API', () => {
  let first: View;

  it('accepts a bundle (202), its build is followed to ready, and the app serves it', async () => {
    const r = await upload(await folderBundle({ 'apphost.toml': TOML, 'main.py': MAIN }));
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    valid('Build', r.body);
    first = r.body as View;
    expect(first).toMatchObject({ app_name: 'shop', state: 'queued' });
    expect(r.headers.get('location')).toBe(first.links.self);
    const { lines, end } = await follow(first.links.log);
    expect(end.reason).toBe('build_finished');
    valid('Build', end.build);
    expect(end.build).toMatchObject({ build_id: first.build_id, state: 'ready' });
    expect(lines).toContain(`ready: shop serves build ${first.build_id}`);
    expect(await callApp()).toBe('v1');

    const app = await call(api.url, 'GET', `/v2/projects/${P}/apps/shop`, { token });
    expect(app.status).toBe(200);
    valid('App', app.body);
    expect(app.body).toMatchObject({
      name: 'shop',
      runtime: 'cortex',
      ready: true,
      build_id: first.build_id,
      bundle: first.bundle.digest,
      url: `http://api.example.test/v4/${P}/shop`,
      config: { app: { name: 'shop' } },
    });
    const list = await call(api.url, 'GET', `/v2/projects/${P}/apps`, { token });
    valid('AppList', list.body);
    expect((list.body as { apps: Array<{ name: string }> }).apps.map((a) => a.name)).toEqual(['shop']);
    const builds = await call(api.url, 'GET', `/v2/projects/${P}/apps/shop/builds`, { token });
    valid('BuildList', builds.body);
    const log = await call(api.url, 'GET', first.links.log, { token });
    valid('BuildLog', log.body);
    expect(log.body).toMatchObject({ complete: true, build: { state: 'ready' } });
    const one = await call(api.url, 'GET', first.links.self, { token });
    valid('Build', one.body);
  });

  const TRAVERSAL: Raw[] = [
    { name: 'apphost.toml', content: TOML },
    { name: 'main.py', content: MAIN },
  ];
  it.each<[string, () => Promise<Buffer>, number, string, RegExp]>([
    [
      'unpacked, larger than the bound',
      () => rawTarGz([...TRAVERSAL, { name: 'big.bin', content: '\0'.repeat(1_100_000) }]),
      400,
      'too_large',
      /unpacked/,
    ],
    [
      'more files than the bound',
      () => rawTarGz([...TRAVERSAL, ...Array.from({ length: 60 }, (_, i) => ({ name: `f${i}.py` }))]),
      400,
      'too_many_files',
      /more than 50 files/,
    ],
    [
      'a path that escapes the folder',
      () => rawTarGz([...TRAVERSAL, { name: '../../etc/cron.d/x' }]),
      400,
      'unsafe_path',
      /escapes the folder/,
    ],
    [
      'an absolute path',
      () => rawTarGz([...TRAVERSAL, { name: '/etc/passwd' }]),
      400,
      'unsafe_path',
      /absolute path/,
    ],
    [
      'a symlink out of the folder',
      () => rawTarGz([...TRAVERSAL, { name: 'passwd', type: 'symlink', linkname: '../../../etc/passwd' }]),
      400,
      'symlink_out',
      /points outside/,
    ],
    [
      'a file written through a symlink',
      () => rawTarGz([...TRAVERSAL, { name: 'lib', type: 'symlink', linkname: 'sub' }, { name: 'lib/x.py' }]),
      400,
      'symlink_out',
      /through the symlink/,
    ],
    [
      'a hard link',
      () => rawTarGz([...TRAVERSAL, { name: 'h', type: 'link', linkname: 'main.py' }]),
      400,
      'unsupported_entry',
      /link entry/,
    ],
    ['not gzip', async () => Buffer.from('just text'), 400, 'not_an_archive', /not a gzip-compressed tar/],
    [
      'gzip that is not a tar',
      async () => gzipSync(Buffer.from('x'.repeat(4096))),
      400,
      'not_an_archive',
      /not a gzip-compressed tar/,
    ],
    [
      'no apphost.toml',
      () => rawTarGz([{ name: 'main.py', content: MAIN }]),
      400,
      'missing_file',
      /apphost\.toml is missing/,
    ],
    [
      'no main.py for the cortex runtime',
      () => rawTarGz([{ name: 'apphost.toml', content: TOML }]),
      400,
      'missing_file',
      /main\.py is missing/,
    ],
    [
      'broken TOML',
      () =>
        rawTarGz([
          { name: 'apphost.toml', content: '[app\nname = "shop"\n' },
          { name: 'main.py', content: MAIN },
        ]),
      400,
      'invalid_config',
      /apphost\.toml:1:\d+: invalid TOML/,
    ],
    [
      'an unknown key',
      () =>
        rawTarGz([
          { name: 'apphost.toml', content: `${TOML}[app.scaling]\nmin_replica = 1\n` },
          { name: 'main.py', content: MAIN },
        ]),
      400,
      'invalid_config',
      /app\.scaling\.min_replica: unknown key/,
    ],
    [
      'a value out of range',
      () =>
        rawTarGz([
          { name: 'apphost.toml', content: `${TOML}[app.scaling]\nresponse_grace_period = 0\n` },
          { name: 'main.py', content: MAIN },
        ]),
      400,
      'invalid_config',
      /response_grace_period: must be an integer from 1 to 43200/,
    ],
    [
      'a Python this platform does not run',
      () =>
        rawTarGz([
          { name: 'apphost.toml', content: `${TOML}python_version = "3.13"\n` },
          { name: 'main.py', content: MAIN },
        ]),
      400,
      'invalid_config',
      /app\.python_version: Python 3\.13 is not available here/,
    ],
    [
      'a custom runtime without an entrypoint (local mode)',
      () => rawTarGz([{ name: 'apphost.toml', content: `${TOML}[app.runtime.custom]\nport = 9000\n` }]),
      400,
      'invalid_config',
      /app\.runtime\.custom\.entrypoint: is required in local mode/,
    ],
    [
      'a requirements file that is not there',
      () =>
        rawTarGz([
          { name: 'apphost.toml', content: `${TOML}[app.dependencies]\nrequirements = "reqs.txt"\n` },
          { name: 'main.py', content: MAIN },
        ]),
      400,
      'missing_file',
      /reqs\.txt is missing/,
    ],
    [
      'requirements pointing outside the folder',
      () => rawTarGz([...TRAVERSAL, { name: 'requirements.txt', content: '-f ../../wheels\nx\n' }]),
      400,
      'unsafe_path',
      /outside the app folder/,
    ],
    [
      'larger than the upload bound',
      () =>
        rawTarGz([
          ...TRAVERSAL,
          {
            name: 'r.bin',
            content: Buffer.from(
              Array.from({ length: 300_000 }, () => Math.floor(Math.random() * 256)),
            ).toString('latin1'),
          },
        ]),
      413,
      'too_large',
      /larger than 200000 bytes/,
    ],
  ])(
    'refuses %s: the named problem, nothing stored, the serving version untouched',
    async (_what, make, status, problem, message) => {
      const data = await make();
      const before = await call(api.url, 'GET', `/v2/projects/${P}/apps/shop/builds`, { token });
      const r = await upload(data);
      expect(r.status, JSON.stringify(r.body)).toBe(status);
      valid('Error', r.body);
      expect(r.body?.error).toMatchObject(
        status === 413
          ? { code: 'payload_too_large', limit_bytes: LIMITS.maxBytes }
          : { code: 'invalid_bundle', problem },
      );
      expect(r.body?.error.message).toMatch(message);
      if (problem === 'invalid_config' && !/TOML/.test(r.body?.error.message ?? ''))
        expect(r.body?.error.problems?.[0]).toMatchObject({ path: expect.stringMatching(/^app\./) });
      // Nothing stored: no object under the bundle's digest, no build record; the app still serves v1.
      const os = await new Objm(nc).open(ARTIFACTS_BUCKET);
      expect(await os.info(sha256Digest(data))).toBeNull();
      const after = await call(api.url, 'GET', `/v2/projects/${P}/apps/shop/builds`, { token });
      expect(after.body).toEqual(before.body);
      const app = await call(api.url, 'GET', `/v2/projects/${P}/apps/shop`, { token });
      expect(app.body).toMatchObject({ build_id: first.build_id, ready: true });
    },
  );

  it('refuses a body that is not application/gzip (415) and one damaged on the way (Content-Digest)', async () => {
    const good = await folderBundle({ 'apphost.toml': TOML, 'main.py': MAIN });
    const wrongType = await upload(good, { type: 'application/json' });
    expect(wrongType.status).toBe(415);
    valid('Error', wrongType.body);
    const digest = createHash('sha256').update('something else').digest('base64');
    const damaged = await upload(good, { headers: { 'content-digest': `sha-256=:${digest}:` } });
    expect(damaged.status).toBe(400);
    expect(damaged.body?.error).toMatchObject({ code: 'invalid_bundle', problem: 'digest_mismatch' });
    const right = createHash('sha256').update(good).digest('base64');
    const ok = await upload(good, { headers: { 'content-digest': `sha-256=:${right}:` } });
    expect(ok.status).toBe(202);
    expect((await follow(ok.body?.links.log ?? '')).end.build.state).toBe('ready');
  });

  it('a symlink out of the app folder is refused already when bundling (the CLI side)', async () => {
    const dir = mkdtempSync(join(root, 'sym-'));
    writeFileSync(join(dir, 'apphost.toml'), TOML);
    writeFileSync(join(dir, 'main.py'), MAIN);
    symlinkSync('/etc/hostname', join(dir, 'host'));
    await expect(packBundle(dir, parseAppConfig(TOML), DEFAULT_BUNDLE_LIMITS)).rejects.toMatchObject({
      problem: 'symlink_out',
    });
  });

  it('needs the project token: none → 401, another project → 404', async () => {
    const data = await folderBundle({ 'apphost.toml': TOML, 'main.py': MAIN });
    expect((await upload(data, { token: 'nope' })).status).toBe(401);
    expect((await upload(data, { token: otherToken })).status).toBe(404);
    expect((await call(api.url, 'GET', `/v2/projects/${P}/apps`, {})).status).toBe(401);
    expect((await call(api.url, 'GET', `/v2/projects/${P}/apps/shop`, { token: otherToken })).status).toBe(
      404,
    );
  });

  it('unknown apps and builds are 404; bad names are 400', async () => {
    expect((await call(api.url, 'GET', `/v2/projects/${P}/apps/nope`, { token })).status).toBe(404);
    expect((await call(api.url, 'GET', `/v2/projects/${P}/apps/shop/builds/zzz`, { token })).status).toBe(
      404,
    );
    const bad = await call(api.url, 'GET', `/v2/projects/${P}/apps/Bad_Name`, { token });
    expect(bad.status).toBe(400);
    valid('Error', bad.body);
  });

  it('serves the JSON Schema of apphost.toml without a token', async () => {
    const r = await call(api.url, 'GET', '/schemas/apphost.schema.json');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      properties: { app: {} },
    });
  });

  it('deletes an app: its process stops, then it is 404 and its builds are gone', async () => {
    const r = await call(api.url, 'DELETE', `/v2/projects/${P}/apps/shop`, { token });
    expect(r.status).toBe(200);
    valid('App', r.body);
    expect(deploys.host.endpoint('shop')).toBeUndefined();
    expect((await call(api.url, 'GET', `/v2/projects/${P}/apps/shop`, { token })).status).toBe(404);
    expect((await call(api.url, 'GET', `/v2/projects/${P}/apps/shop/builds`, { token })).body).toEqual({
      builds: [],
    });
    expect((await call(api.url, 'DELETE', `/v2/projects/${P}/apps/shop`, { token })).status).toBe(404);
  });
});
