/**
 * The cluster log source when the Kubernetes API refuses or is overloaded — answers the real API server
 * does not give on demand — is answered like every other Kubernetes failure of the management API
 * (shared/kube/errors.ts). Reading from the real API server: test/integration/management/logs-kube.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { kubeConfigFromString } from '../../shared/kube/config.ts';
import { localKubeconfigYaml, localServers } from '../../shared/testing/local-server.ts';
import { createKubeLogSource, DEFAULT_KUBE_LOG_SETTINGS, unavailable } from './kube.ts';

const listen = localServers();

/** An API server answering every request with `status` and a Status body of `reason`. */
async function refusingServer(status: number, reason: string): Promise<string> {
  return listen((_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({ kind: 'Status', status: 'Failure', code: status, reason, message: `${reason}!` }),
    );
  });
}

const source = (url: string) =>
  createKubeLogSource(kubeConfigFromString(localKubeconfigYaml(url)), DEFAULT_KUBE_LOG_SETTINGS);

describe('kube log source, Kubernetes failures', () => {
  it('an overloaded API server is a 502 the caller may retry, not an internal error', async () => {
    const err = await source(await refusingServer(429, 'TooManyRequests'))
      .read('p', 'hello', {}, 10)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ code: ErrorCode.UpstreamUnreachable, status: 502, retryAfter: 1 });
  });

  it('a refusal of our own RBAC says so (500), without passing the API server text on as if it were the caller’s fault', async () => {
    const err = await source(await refusingServer(403, 'Forbidden'))
      .read('p', 'hello', {}, 10)
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: ErrorCode.Internal, status: 500 });
    expect((err as Error).message).toMatch(/RBAC/);
  });

  it("a replica whose logs cannot be read shows the API server's reason, whatever the error's shape", () => {
    // client-node's Log answers 500s with the Status as an object; other clients keep it as JSON text.
    const status = { kind: 'Status', code: 400, reason: 'BadRequest', message: 'container "app" is waiting' };
    expect(unavailable('p1', { code: 400, body: status }).message).toBe(
      'apphost: no logs from this replica: container "app" is waiting',
    );
    expect(unavailable('p1', { code: 400, body: JSON.stringify(status) }).message).toBe(
      'apphost: no logs from this replica: container "app" is waiting',
    );
    expect(unavailable('p1', { code: 404, body: undefined }).message).toBe(
      'apphost: no logs from this replica: the Kubernetes API answered 404',
    );
  });
});
