/**
 * Local HTTP servers for unit tests that need a peer misbehaving in ways the real one does not on demand
 * (an API server that hangs, refuses or sends odd streams): each is closed, its connections too, after
 * the test that started it.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach } from 'vitest';

/** Call at a test file's top level: registers the cleanup and returns `listen(handler)` → the server's URL. */
export function localServers(): (handler: RequestListener) => Promise<string> {
  const open = new Set<Server>();
  afterEach(async () => {
    const all = [...open];
    open.clear();
    await Promise.all(
      all.map((s) => {
        s.closeAllConnections();
        return new Promise((r) => s.close(r));
      }),
    );
  });
  return async (handler) => {
    const s = createServer(handler);
    open.add(s);
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
  };
}

/** A kubeconfig for a local test API server: token auth, TLS checks off. */
export const localKubeconfigYaml = (server: string) => `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`;
