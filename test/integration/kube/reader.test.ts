/**
 * The gateway's read-only Kubernetes client (src/shared/kube/reader.ts) and its access loader (access.ts)
 * against the real API server: paginated lists, gets, watches (events, bookmarks, the server's end,
 * reopening from a version; an expired version's ERROR event is in src/shared/kube/reader.test.ts: etcd
 * compacts only every 5 minutes here), and authentication by token (a token file read again),
 * by client certificate, and a server certificate its CA did not sign being refused.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadGatewayKubeReader } from '../../../src/gateway/kube-client.ts';
import { DEFAULT_GATEWAY_KUBE_SETTINGS } from '../../../src/gateway/kube-settings.ts';
import {
  isUnsupported,
  type KubeAccess,
  kubeAccessFromKubeconfig,
  TOKEN_REREAD_MS,
} from '../../../src/shared/kube/access.ts';
import type { WatchEvent } from '../../../src/shared/kube/client.ts';
import { KubeApiError, kubeErrorToApiError } from '../../../src/shared/kube/errors.ts';
import { Resources, type Secret } from '../../../src/shared/kube/objects.ts';
import { type ClosableKubeReader, createKubeReader } from '../../../src/shared/kube/reader.ts';
import { silentLogger } from '../../../src/shared/log.ts';
import { createTestNamespace, testKubeAccess, testKubeConfig } from '../../harness/kube.ts';

const kc = testKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const dir = mkdtempSync(join(tmpdir(), 'apphost-reader-'));
const readers: ClosableKubeReader[] = [];
let ns: string;

const reader = (access: KubeAccess, o: { pageSize?: number; now?: () => number } = {}) => {
  const r = createKubeReader(access, {
    userAgent: 'apphost-reader-test',
    requestTimeoutMs: 30_000,
    watchIdleTimeoutMs: 60_000,
    ...o,
  });
  readers.push(r);
  return r;
};

/** The test kubeconfig's cluster with `user` (and `cluster` fields) instead of its own. */
async function accessWith(
  user: string,
  cluster = `certificate-authority-data: ${inject('kubeconfigYaml').match(/certificate-authority-data: (\S+)/)?.[1]}`,
  now?: () => number,
) {
  const yaml = `apiVersion: v1
kind: Config
current-context: t
contexts: [{name: t, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "${inject('kubeServer')}", ${cluster}}}]
users: [{name: u, user: {${user}}}]
`;
  const a = await kubeAccessFromKubeconfig(yaml, { source: 'test', dir, ...(now ? { now } : {}) });
  if (isUnsupported(a)) throw new Error(a.unsupported);
  return a;
}

const secret = (name: string, labels: Record<string, string> = {}) => ({
  metadata: { name, namespace: ns, labels },
  data: { v: Buffer.from(name).toString('base64') },
});

beforeAll(async () => {
  ns = await createTestNamespace(kc, 'kube-reader');
});
afterAll(async () => {
  await Promise.all(readers.map((r) => r.close()));
  rmSync(dir, { recursive: true, force: true });
  if (ns) await core.deleteNamespace({ name: ns }).catch(() => undefined);
});

describe('the read-only client against the API server', () => {
  it('lists every page with the selectors, in wire form, and gets one object or undefined', async () => {
    for (let i = 0; i < 5; i++)
      await core.createNamespacedSecret({
        namespace: ns,
        body: secret(`s${i}`, { pick: i % 2 ? 'odd' : 'even' }),
      });
    const r = reader(await testKubeAccess(), { pageSize: 2 });
    const all = await r.list<Secret>(Resources.Secret, { namespace: ns });
    expect(all.items.map((s) => s.metadata.name).sort()).toEqual(['s0', 's1', 's2', 's3', 's4']);
    expect(all.items[0]).toMatchObject({ apiVersion: 'v1', kind: 'Secret' });
    expect(typeof all.items[0]?.metadata.creationTimestamp).toBe('string');
    expect(Number(all.resourceVersion)).toBeGreaterThan(0);
    const even = await r.list<Secret>(Resources.Secret, { namespace: ns, labelSelector: 'pick=even' });
    expect(even.items.map((s) => s.metadata.name).sort()).toEqual(['s0', 's2', 's4']);
    const one = await r.list<Secret>(Resources.Secret, { namespace: ns, fieldSelector: 'metadata.name=s3' });
    expect(one.items.map((s) => s.metadata.name)).toEqual(['s3']);

    const got = await r.get<Secret>(Resources.Secret, { namespace: ns, name: 's1' });
    expect(Buffer.from(got?.data?.v ?? '', 'base64').toString()).toBe('s1');
    expect(await r.get(Resources.Secret, { namespace: ns, name: 'missing' })).toBeUndefined();
  });

  it('watches changes from a version until the server ends the watch, with bookmarks, and reopens from the last', async () => {
    const r = reader(await testKubeAccess());
    const { resourceVersion } = await r.list(Resources.Secret, { namespace: ns });
    const events: Array<WatchEvent<Secret>> = [];
    const watching = r.watch<Secret>(Resources.Secret, {
      namespace: ns,
      resourceVersion,
      // The three writes below must land before the server ends the watch: a wide margin on a busy machine.
      timeoutSeconds: 10,
      signal: new AbortController().signal,
      onEvent: (ev) => events.push(ev),
    });
    await core.createNamespacedSecret({ namespace: ns, body: secret('w1') });
    await core.replaceNamespacedSecret({
      namespace: ns,
      name: 'w1',
      body: { ...secret('w1'), data: { v: 'eA==' } },
    });
    await core.deleteNamespacedSecret({ namespace: ns, name: 'w1' });
    // The server ends it after timeoutSeconds: the watch resolves.
    await watching;
    expect(
      events.filter((e) => e.type !== 'BOOKMARK').map((e) => `${e.type} ${e.object.metadata.name}`),
    ).toEqual(['ADDED w1', 'MODIFIED w1', 'DELETED w1']);
    // The API server sends a bookmark as it ends a watch that asked for them.
    const last = events.at(-1);
    expect(last?.type).toBe('BOOKMARK');

    // Reopened from the last version seen: only what changed since.
    await core.createNamespacedSecret({ namespace: ns, body: secret('w2') });
    const again: string[] = [];
    await r.watch<Secret>(Resources.Secret, {
      namespace: ns,
      resourceVersion: last?.object.metadata.resourceVersion ?? '',
      timeoutSeconds: 1,
      signal: new AbortController().signal,
      onEvent: (ev) => {
        if (ev.type !== 'BOOKMARK') again.push(`${ev.type} ${ev.object.metadata.name}`);
      },
    });
    expect(again).toEqual(['ADDED w2']);
  });

  it('authenticates with a client certificate (no token): anonymous is refused, the certificate is admin', async () => {
    const { certFile, keyFile } = inject('kubeClientCert');
    const withCert = reader(await accessWith(`client-certificate: ${certFile}, client-key: ${keyFile}`));
    expect(await withCert.get(Resources.Namespace, { name: ns })).toMatchObject({ metadata: { name: ns } });
    const anonymous = reader(await accessWith(''));
    const err = await anonymous.get(Resources.Namespace, { name: ns }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect(err).toMatchObject({ statusCode: 403, reason: 'Forbidden' });
  });

  it('authenticates with a token file, read again after TOKEN_REREAD_MS (a rotated or revoked token)', async () => {
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, inject('kubeToken'));
    let t = 0;
    const r = reader(await accessWith(`tokenFile: ${tokenFile}`, undefined, () => t));
    expect(await r.get(Resources.Namespace, { name: ns })).toBeDefined();
    writeFileSync(tokenFile, 'revoked');
    t = TOKEN_REREAD_MS;
    const err = await r.get(Resources.Namespace, { name: ns }).catch((e: unknown) => e);
    expect(err).toMatchObject({ statusCode: 401, reason: 'Unauthorized' });
    expect(kubeErrorToApiError(err, `namespace ${ns}`).code).toBe('internal');
    writeFileSync(tokenFile, inject('kubeToken'));
    t = 2 * TOKEN_REREAD_MS;
    expect(await r.get(Resources.Namespace, { name: ns })).toBeDefined();
  });

  it('refuses a server whose certificate the configured CA did not sign, and accepts it only with insecure-skip-tls-verify', async () => {
    const otherCa = Buffer.from(rootCertificates[0] ?? '').toString('base64');
    const wrong = reader(
      await accessWith(`token: ${inject('kubeToken')}`, `certificate-authority-data: ${otherCa}`),
    );
    const err = await wrong.get(Resources.Namespace, { name: ns }).catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(KubeApiError);
    expect(String((err as { code?: string }).code)).toMatch(/CERT|SIGNATURE|ISSUER/);
    const insecure = reader(
      await accessWith(`token: ${inject('kubeToken')}`, 'insecure-skip-tls-verify: true'),
    );
    expect(await insecure.get(Resources.Namespace, { name: ns })).toBeDefined();
  });

  it('keeps its connections when the TLS files cannot be read at a renewal, and renews once they can', async () => {
    const caFile = join(dir, 'renew-ca.crt');
    const ca = Buffer.from(
      inject('kubeconfigYaml').match(/certificate-authority-data: (\S+)/)?.[1] ?? '',
      'base64',
    );
    writeFileSync(caFile, ca);
    let t = 0;
    const r = createKubeReader(
      await accessWith(`token: ${inject('kubeToken')}`, `certificate-authority: ${caFile}`),
      {
        userAgent: 'apphost-reader-test',
        requestTimeoutMs: 30_000,
        watchIdleTimeoutMs: 60_000,
        agentRenewMs: 1_000,
        now: () => t,
      },
    );
    readers.push(r);
    expect(await r.get(Resources.Namespace, { name: ns })).toBeDefined();
    // Mid-rotation: the CA file is gone when the Agent is due for renewal.
    rmSync(caFile);
    t = 2_000;
    expect(await r.get(Resources.Namespace, { name: ns })).toBeDefined();
    // Readable again: the next request renews with what it holds now (a CA that did not sign the server's
    // certificate is refused, so the renewal did read it), then with the right one.
    writeFileSync(caFile, rootCertificates[0] ?? '');
    t = 2_500;
    const err = await r.get(Resources.Namespace, { name: ns }).catch((e: unknown) => e);
    expect(String((err as { code?: string }).code)).toMatch(/CERT|SIGNATURE|ISSUER/);
    writeFileSync(caFile, ca);
    t = 4_000;
    expect(await r.get(Resources.Namespace, { name: ns })).toBeDefined();
  });

  it("serves a kubeconfig with an exec credential plugin through client-node (the gateway's fallback)", async () => {
    const credential = JSON.stringify({
      apiVersion: 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      status: { token: inject('kubeToken') },
    });
    const file = join(dir, 'exec-kubeconfig');
    const ca = inject('kubeconfigYaml').match(/certificate-authority-data: (\S+)/)?.[1];
    writeFileSync(
      file,
      `apiVersion: v1
kind: Config
current-context: t
contexts: [{name: t, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "${inject('kubeServer')}", certificate-authority-data: ${ca}}}]
users:
- name: u
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: sh, args: [-c, 'echo ${credential.replaceAll('"', '\\"')}'], interactiveMode: Never}
`,
    );
    const logged: string[] = [];
    const log = silentLogger();
    const r = await loadGatewayKubeReader({
      kubeconfig: file,
      env: {},
      home: undefined,
      settings: DEFAULT_GATEWAY_KUBE_SETTINGS,
      log: Object.assign(Object.create(log), { info: (o: { needs?: string }) => logged.push(o.needs ?? '') }),
    });
    readers.push(r);
    expect(logged).toEqual(['user exec credential plugin']);
    expect(await r.get(Resources.Namespace, { name: ns })).toMatchObject({ metadata: { name: ns } });
    const { items } = await r.list(Resources.Secret, { namespace: ns });
    expect(items.length).toBeGreaterThan(0);
  });
});
