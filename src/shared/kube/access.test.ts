import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  isUnsupported,
  type KubeAccess,
  KubeConfigError,
  kubeAccessFromKubeconfig,
  loadKubeAccess,
  TOKEN_REREAD_MS,
  type UnsupportedAccess,
} from './access.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'apphost-access-'));
  dirs.push(d);
  return d;
};

const kubeconfig = (cluster: string, user: string) => `apiVersion: v1
kind: Config
current-context: b
contexts:
- {name: a, context: {cluster: other, user: other}}
- {name: b, context: {cluster: c, user: u}}
clusters:
- {name: other, cluster: {server: "https://wrong:1"}}
- name: c
  cluster: {${cluster}}
users:
- {name: other, user: {token: wrong}}
- name: u
  user: {${user}}
`;

const supported = (a: KubeAccess | UnsupportedAccess): KubeAccess => {
  if (isUnsupported(a)) throw new Error(`unsupported: ${a.unsupported}`);
  return a;
};

describe('Kubernetes access from a kubeconfig', () => {
  it("uses the current context's cluster and user: server, CA data, token, impersonation, TLS name", async () => {
    const a = supported(
      await kubeAccessFromKubeconfig(
        kubeconfig(
          `server: "https://10.0.0.1:6443/", certificate-authority-data: ${Buffer.from('CA').toString('base64')}, tls-server-name: api.local`,
          'token: s3cret, as: jane, as-groups: [devs, ops], as-uid: "42"',
        ),
        { source: 'k', dir: '/' },
      ),
    );
    expect(a.server).toBe('https://10.0.0.1:6443');
    expect(a.tls()).toEqual({ ca: Buffer.from('CA'), rejectUnauthorized: true, servername: 'api.local' });
    expect(a.headers()).toEqual({
      authorization: 'Bearer s3cret',
      'impersonate-user': 'jane',
      'impersonate-group': ['devs', 'ops'],
      'impersonate-uid': '42',
    });
  });

  it('reads CA and client certificate files relative to the kubeconfig, each time TLS is set up', async () => {
    const dir = tmp();
    writeFileSync(join(dir, 'ca.crt'), 'CA1');
    writeFileSync(join(dir, 'me.crt'), 'CERT1');
    writeFileSync(join(dir, 'me.key'), 'KEY1');
    const a = supported(
      await kubeAccessFromKubeconfig(
        kubeconfig(
          'server: "https://h:1", certificate-authority: ca.crt, insecure-skip-tls-verify: true',
          `client-certificate: me.crt, client-key: ${join(dir, 'me.key')}`,
        ),
        { source: 'k', dir },
      ),
    );
    expect(a.tls()).toEqual({
      ca: Buffer.from('CA1'),
      cert: Buffer.from('CERT1'),
      key: Buffer.from('KEY1'),
      rejectUnauthorized: false,
    });
    writeFileSync(join(dir, 'me.crt'), 'CERT2');
    expect(a.tls().cert).toEqual(Buffer.from('CERT2'));
    expect(a.headers()).toEqual({});
  });

  it('reads a tokenFile again once TOKEN_REREAD_MS passed (rotated tokens), keeping the last on a failed read', async () => {
    const dir = tmp();
    writeFileSync(join(dir, 'token'), 'one\n');
    let t = 0;
    const a = supported(
      await kubeAccessFromKubeconfig(kubeconfig('server: "https://h:1"', 'tokenFile: token'), {
        source: 'k',
        dir,
        now: () => t,
      }),
    );
    expect(a.headers()).toEqual({ authorization: 'Bearer one' });
    writeFileSync(join(dir, 'token'), 'two');
    t = TOKEN_REREAD_MS - 1;
    expect(a.headers()).toEqual({ authorization: 'Bearer one' });
    t = TOKEN_REREAD_MS;
    expect(a.headers()).toEqual({ authorization: 'Bearer two' });
    rmSync(join(dir, 'token'));
    t = 3 * TOKEN_REREAD_MS;
    expect(a.headers()).toEqual({ authorization: 'Bearer two' });
  });

  it.each([
    ['exec: {command: aws}', 'user exec credential plugin'],
    ['auth-provider: {name: oidc}', 'user auth-provider'],
    ['username: u, password: p', 'user basic auth'],
  ])('reports a user with %s as unsupported (the gateway then uses client-node)', async (user, why) => {
    const a = await kubeAccessFromKubeconfig(kubeconfig('server: "https://h:1"', user), {
      source: 'k',
      dir: '/',
    });
    expect(a).toEqual({ unsupported: why, source: 'k' });
  });

  it('reports a cluster with proxy-url as unsupported', async () => {
    const a = await kubeAccessFromKubeconfig(
      kubeconfig('server: "https://h:1", proxy-url: "http://proxy:3128"', 'token: t'),
      { source: 'k', dir: '/' },
    );
    expect(a).toEqual({ unsupported: 'cluster proxy-url', source: 'k' });
  });

  it.each([
    ['apiVersion: v1\nkind: Config\n', 'kubeconfig k: no current-context'],
    [
      kubeconfig('insecure-skip-tls-verify: true', 'token: t'),
      'kubeconfig k: cluster "c" is missing or has no server',
    ],
    [
      kubeconfig('server: "https://h:1", certificate-authority: /nonexistent/ca.crt', 'token: t'),
      'kubeconfig k: certificate-authority: ENOENT',
    ],
    [
      kubeconfig('server: "https://h:1"', 'client-certificate-data: Q0VSVA=='),
      'kubeconfig k: user "u" has a client certificate without its key',
    ],
    ['{ not: yaml: at all', 'kubeconfig k: not YAML'],
  ])('refuses an unusable kubeconfig with a message naming the problem (%#)', async (text, message) => {
    const err = await kubeAccessFromKubeconfig(text, { source: 'k', dir: '/' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeConfigError);
    expect((err as Error).message).toContain(message);
  });

  it('names where a kubeconfig is not YAML without quoting it (the line may hold a token or key)', async () => {
    const text =
      'apiVersion: v1\nusers:\n- name: u\n  user:\n    token: s3cret-t0ken\n     client-key-data: QUJD\n';
    const err = await kubeAccessFromKubeconfig(text, { source: 'k', dir: '/' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeConfigError);
    expect((err as Error).message).toMatch(/^kubeconfig k: not YAML: .+ \(line 5, column 12\)$/);
    expect((err as Error).message).not.toContain('s3cret');
    expect((err as Error).message).not.toContain('QUJD');
  });
});

describe('loadKubeAccess: the default chain', () => {
  it('takes the first KUBECONFIG file, else ~/.kube/config', async () => {
    const dir = tmp();
    writeFileSync(join(dir, 'one'), kubeconfig('server: "https://one:1"', 'token: t'));
    const one = await loadKubeAccess({ kubeconfig: `:${join(dir, 'one')}:/nope`, env: {} });
    expect(supported(one).server).toBe('https://one:1');
    expect(supported(one).source).toBe(join(dir, 'one'));
    mkdirSync(join(dir, '.kube'));
    writeFileSync(join(dir, '.kube', 'config'), kubeconfig('server: "https://home:1"', 'token: t'));
    expect(supported(await loadKubeAccess({ env: {}, home: dir })).server).toBe('https://home:1');
    await expect(loadKubeAccess({ kubeconfig: '/nope/config', env: {} })).rejects.toThrow(
      'kubeconfig /nope/config: ENOENT',
    );
  });

  it("in a pod: the kubelet's service address, the service account's CA and token (re-read)", async () => {
    const sa = tmp();
    writeFileSync(join(sa, 'token'), 'pod-token');
    writeFileSync(join(sa, 'ca.crt'), 'CA');
    let t = 0;
    const a = supported(
      await loadKubeAccess({
        env: { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' },
        home: tmp(),
        serviceAccountDir: sa,
        now: () => t,
      }),
    );
    expect(a.server).toBe('https://[fd00::1]:443');
    expect(a.source).toBe('in-cluster');
    expect(a.tls()).toEqual({ ca: Buffer.from('CA'), rejectUnauthorized: true });
    writeFileSync(join(sa, 'token'), 'rotated');
    t = TOKEN_REREAD_MS;
    expect(a.headers()).toEqual({ authorization: 'Bearer rotated' });
    await expect(loadKubeAccess({ env: {}, home: tmp(), serviceAccountDir: sa })).rejects.toThrow(
      'KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT',
    );
  });

  it('without any: http://localhost:8080, as client-node', async () => {
    const a = supported(await loadKubeAccess({ env: {}, home: tmp(), serviceAccountDir: tmp() }));
    expect(a.server).toBe('http://localhost:8080');
  });
});
