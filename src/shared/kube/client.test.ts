/**
 * The bounds and failure paths of the shared KubeClient, against API servers that hang or fail — faults
 * the real one does not produce on demand. The rest of the client is tested against the real API
 * server (test/integration/kube/client.test.ts).
 */
import { Watch } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { localKubeconfigYaml, localServers } from '../testing/local-server.ts';
import { createKubeClient } from './client.ts';
import { kubeConfigFromString } from './config.ts';
import { isGone } from './errors.ts';
import { Resources } from './objects.ts';

const listen = localServers();

/**
 * An API server that never answers a request, and answers a watch with headers and then `watchBody`
 * (nothing by default) without ever ending it.
 */
async function hangingServer(watchBody = ''): Promise<{ url: string; requests: string[] }> {
  const requests: string[] = [];
  const url = await listen((req, res) => {
    requests.push(req.url ?? '');
    if (req.url?.includes('watch=true')) {
      res.writeHead(200, { 'content-type': 'application/json' }).flushHeaders();
      if (watchBody) res.write(watchBody);
    }
  });
  return { url, requests };
}

const kubeconfig = (server: string) => kubeConfigFromString(localKubeconfigYaml(server));

const client = (url: string, bounds: { requestTimeoutMs: number; watchIdleTimeoutMs: number }) =>
  createKubeClient(kubeconfig(url), { fieldManager: 'test', ...bounds });

describe('KubeClient bounds and failures', () => {
  it('gives up on a request the server never answers, with a TimeoutError', async () => {
    const { url, requests } = await hangingServer();
    const c = client(url, { requestTimeoutMs: 200, watchIdleTimeoutMs: 60_000 });
    await expect(c.get(Resources.App, { namespace: 'n', name: 'a' })).rejects.toMatchObject({
      name: 'TimeoutError',
    });
    // Addressed from its ResourceType: no discovery request went first. (Under load the bound may pass
    // before the one request reaches the server, so only what did arrive is checked.)
    expect(requests.filter((r) => r !== '/apis/apphost.dev/v1alpha1/namespaces/n/apps/a')).toEqual([]);
  });

  it('ends a watch that stays silent for the idle bound (it resolves, so the informer reopens it)', async () => {
    const { url, requests } = await hangingServer();
    const c = client(url, { requestTimeoutMs: 60_000, watchIdleTimeoutMs: 200 });
    // client-node's bound also covers connecting: under load it may pass before the request is sent,
    // so watch again until the server has seen one (each watch must end by the bound to get there).
    for (let i = 0; i < 20 && requests.length === 0; i++)
      await c.watch(Resources.Pod, {
        namespace: 'n',
        resourceVersion: '5',
        timeoutSeconds: 300,
        signal: new AbortController().signal,
        onEvent: () => undefined,
      });
    expect(requests).toHaveLength(1);
    const watched = new URL(`http://x${requests[0]}`);
    expect(watched.pathname).toBe('/api/v1/namespaces/n/pods');
    expect(Object.fromEntries(watched.searchParams)).toMatchObject({
      watch: 'true',
      allowWatchBookmarks: 'true',
      resourceVersion: '5',
      timeoutSeconds: '300',
    });
  });

  it('ends a watch with the error of an ERROR event (a Gone version makes the informer relist)', async () => {
    const status = { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' };
    const { url } = await hangingServer(`${JSON.stringify({ type: 'ERROR', object: status })}\n`);
    const c = client(url, { requestTimeoutMs: 60_000, watchIdleTimeoutMs: 60_000 });
    const watching = c.watch(Resources.Pod, {
      resourceVersion: '1',
      timeoutSeconds: 300,
      signal: new AbortController().signal,
      onEvent: () => undefined,
    });
    await expect(watching).rejects.toSatisfy(isGone);
  });

  it("relies on client-node's Watch keeping its idle bound in `requestTimeoutMs` (the one private field set)", () => {
    const watch = new Watch(kubeconfig('http://127.0.0.1:1'));
    // biome-ignore lint/complexity/useLiteralKeys: the private field the client sets
    expect(watch['requestTimeoutMs']).toBe(30_000);
  });
});
