/**
 * The bounds and failure paths of the read-only client, against API servers that hang, fail or send what
 * the real one does not send on demand. The rest is tested against the real API server
 * (test/integration/kube/reader.test.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { localServers } from '../testing/local-server.ts';
import type { KubeAccess } from './access.ts';
import { isGone, KubeApiError, kubeErrorToApiError } from './errors.ts';
import { Resources } from './objects.ts';
import { collectionPath, createKubeReader } from './reader.ts';

const listen = localServers();

async function serve(
  handle: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ url: string; requests: Array<{ url: string; headers: IncomingMessage['headers'] }> }> {
  const requests: Array<{ url: string; headers: IncomingMessage['headers'] }> = [];
  const url = await listen((req, res) => {
    requests.push({ url: req.url ?? '', headers: req.headers });
    handle(req, res);
  });
  return { url, requests };
}

const access = (server: string): KubeAccess => ({
  server,
  tls: () => ({ rejectUnauthorized: true }),
  headers: () => ({ authorization: 'Bearer t0ken', 'impersonate-user': 'someone' }),
  source: 'test',
});
const reader = (url: string, bounds: { requestTimeoutMs: number; watchIdleTimeoutMs: number }) =>
  createKubeReader(access(url), { userAgent: 'apphost-test', ...bounds });
const watchOpts = (onEvent: (ev: unknown) => void = () => undefined) => ({
  namespace: 'n',
  resourceVersion: '5',
  timeoutSeconds: 300,
  signal: new AbortController().signal,
  onEvent,
});

describe('the read-only Kubernetes client', () => {
  it('addresses core, grouped and cluster-scoped kinds without discovery', () => {
    expect(collectionPath(Resources.Secret, 'n')).toBe('/api/v1/namespaces/n/secrets');
    expect(collectionPath(Resources.App, 'n')).toBe('/apis/apphost.dev/v1alpha1/namespaces/n/apps');
    expect(collectionPath(Resources.EndpointSlice)).toBe('/apis/discovery.k8s.io/v1/endpointslices');
    expect(collectionPath(Resources.Namespace, 'ignored')).toBe('/api/v1/namespaces');
  });

  it('gives up on a request the server never answers after requestTimeoutMs, naming what it asked', async () => {
    const { url, requests } = await serve(() => undefined);
    const c = reader(url, { requestTimeoutMs: 200, watchIdleTimeoutMs: 60_000 });
    await expect(c.get(Resources.App, { namespace: 'n', name: 'a' })).rejects.toThrow(
      'get apps n/a: no answer within 200 ms',
    );
    expect(requests.map((r) => r.url)).toEqual(['/apis/apphost.dev/v1alpha1/namespaces/n/apps/a']);
    expect(requests[0]?.headers).toMatchObject({
      authorization: 'Bearer t0ken',
      'impersonate-user': 'someone',
      'user-agent': 'apphost-test',
    });
    await c.close();
  });

  it('answers an error as a KubeApiError with the Status reason (errors.ts maps it), a 404 get as undefined', async () => {
    const { url } = await serve((req, res) => {
      const forbidden = req.url?.includes('secrets');
      const status = forbidden
        ? { kind: 'Status', code: 403, reason: 'Forbidden', message: 'secrets is forbidden' }
        : { kind: 'Status', code: 404, reason: 'NotFound', message: 'apps "a" not found' };
      res.writeHead(status.code, { 'content-type': 'application/json' }).end(JSON.stringify(status));
    });
    const c = reader(url, { requestTimeoutMs: 5_000, watchIdleTimeoutMs: 60_000 });
    expect(await c.get(Resources.App, { namespace: 'n', name: 'a' })).toBeUndefined();
    const err = await c.list(Resources.Secret, { namespace: 'n' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect(err).toMatchObject({ statusCode: 403, reason: 'Forbidden' });
    expect(kubeErrorToApiError(err, 'secrets').message).toMatch(/RBAC is missing/);
    const refused = await c.watch(Resources.Secret, watchOpts()).catch((e: unknown) => e);
    expect(refused).toMatchObject({ statusCode: 403, reason: 'Forbidden' });
    await c.close();
  });

  it('ends a watch that stays silent for the idle bound (it resolves, so the informer reopens it)', async () => {
    const { url, requests } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).flushHeaders();
    });
    const c = reader(url, { requestTimeoutMs: 60_000, watchIdleTimeoutMs: 1_000 });
    await c.watch(Resources.Pod, watchOpts());
    expect(requests).toHaveLength(1);
    const watched = new URL(`http://x${requests[0]?.url}`);
    expect(watched.pathname).toBe('/api/v1/namespaces/n/pods');
    expect(Object.fromEntries(watched.searchParams)).toEqual({
      watch: 'true',
      allowWatchBookmarks: 'true',
      resourceVersion: '5',
      timeoutSeconds: '300',
    });
    await c.close();
  });

  it('ends a watch whose server never sends the headers after the idle bound, too', async () => {
    const { url } = await serve(() => undefined);
    const c = reader(url, { requestTimeoutMs: 60_000, watchIdleTimeoutMs: 1_000 });
    await c.watch(Resources.Pod, watchOpts());
    await c.close();
  });

  it('hands on events split across chunks, then ends with the error of an ERROR event (Gone: relist)', async () => {
    const ev = (type: string, name: string) =>
      JSON.stringify({ type, object: { metadata: { name, resourceVersion: '7' } } });
    const status = { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' };
    const { url } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const all = `${ev('ADDED', 'a')}\n${ev('BOOKMARK', '')}\n${ev('MODIFIED', 'ä')}\n`;
      // Torn mid-line and mid-character.
      const bytes = Buffer.from(all);
      const cut = bytes.indexOf(Buffer.from('ä')) + 1;
      res.write(bytes.subarray(0, cut));
      setTimeout(() => {
        res.write(bytes.subarray(cut));
        res.write(`${JSON.stringify({ type: 'ERROR', object: status })}\n`);
      }, 50);
    });
    const c = reader(url, { requestTimeoutMs: 60_000, watchIdleTimeoutMs: 60_000 });
    const seen: string[] = [];
    const watching = c.watch(
      Resources.Pod,
      watchOpts((e) => {
        const { type, object } = e as { type: string; object: { metadata: { name: string } } };
        seen.push(`${type} ${object.metadata.name}`);
      }),
    );
    await expect(watching).rejects.toSatisfy(isGone);
    expect(seen).toEqual(['ADDED a', 'BOOKMARK ', 'MODIFIED ä']);
    await c.close();
  });

  it('ends a watch with an error when one event grows past its bound (no newline: a broken proxy)', async () => {
    const { url } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      // 64 KiB chunks, never a newline, for as long as the reader reads.
      const chunk = 'x'.repeat(64 * 1024);
      const t = setInterval(() => res.write(chunk), 5);
      res.on('close', () => clearInterval(t));
    });
    const c = createKubeReader(access(url), {
      userAgent: 'apphost-test',
      requestTimeoutMs: 60_000,
      watchIdleTimeoutMs: 60_000,
      watchEventMaxChars: 256 * 1024,
    });
    await expect(c.watch(Resources.Pod, watchOpts())).rejects.toThrow(
      /an event longer than 262144 characters/,
    );
    await c.close();
  });

  it('ends a watch with what its event handler throws, and resolves when the caller aborts', async () => {
    const { url } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a' } } })}\n`);
    });
    const c = reader(url, { requestTimeoutMs: 60_000, watchIdleTimeoutMs: 60_000 });
    await expect(
      c.watch(
        Resources.Pod,
        watchOpts(() => {
          throw new Error('handler failed');
        }),
      ),
    ).rejects.toThrow('handler failed');
    const abort = new AbortController();
    const watching = c.watch(Resources.Pod, { ...watchOpts(), signal: abort.signal });
    setTimeout(() => abort.abort(), 100);
    await expect(watching).resolves.toBeUndefined();
    await c.close();
  });

  it('lists every page, filling in apiVersion and kind', async () => {
    const { url, requests } = await serve((req, res) => {
      const second = req.url?.includes('continue=');
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          metadata: second ? { resourceVersion: '9' } : { resourceVersion: '8', continue: 'tok+/=' },
          items: [{ metadata: { name: second ? 'b' : 'a', namespace: 'n' } }],
        }),
      );
    });
    const c = reader(url, { requestTimeoutMs: 5_000, watchIdleTimeoutMs: 60_000 });
    const { items, resourceVersion } = await c.list(Resources.Secret, { labelSelector: 'x=y' });
    expect(items.map((i) => [i.apiVersion, i.kind, i.metadata.name])).toEqual([
      ['v1', 'Secret', 'a'],
      ['v1', 'Secret', 'b'],
    ]);
    expect(resourceVersion).toBe('9');
    const second = new URL(`http://x${requests[1]?.url}`);
    expect(second.searchParams.get('continue')).toBe('tok+/=');
    expect(second.searchParams.get('labelSelector')).toBe('x=y');
    await c.close();
  });
});
