/**
 * The cluster log source against the real kube-apiserver: it finds the project's namespace by label and
 * the app's pods by the operator's label, and reports a replica whose logs cannot be read instead of
 * skipping it. (The test control plane has no kubelet, so no pod here ever has logs: reading real
 * container output is left to test/cluster.)
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { createKubeLogSource } from '../../../src/management/logs/kube.ts';
import { testKubeConfig } from '../../harness/kube.ts';
import { createProjectNamespace, uniqueId } from './fixtures.ts';

const kc = testKubeConfig();
const project = uniqueId('logs');
let namespace: string;

const pod = (name: string, app: string) => ({
  metadata: { name, labels: { 'apphost.dev/app': app } },
  spec: { containers: [{ name: 'app', image: 'example.invalid/app:1' }] },
});

beforeAll(async () => {
  namespace = await createProjectNamespace(kc, project);
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespacedPod({ namespace, body: pod('hello-a', 'hello') });
  await core.createNamespacedPod({ namespace, body: pod('hello-b', 'hello') });
  await core.createNamespacedPod({ namespace, body: pod('other-a', 'other') });
});

describe('kube log source', () => {
  const source = createKubeLogSource(kc, {
    limitBytesPerPod: 1024,
    readTimeoutMs: 10_000,
    podPollMs: 1_000,
    maxQueuedLines: 10,
  });

  it("reads every replica of the app, and only the app's, saying why one has no logs", async () => {
    const lines = await source.read(project, 'hello', {}, 100);
    expect(lines.map((l) => l.replica).sort()).toEqual(['hello-a', 'hello-b']);
    for (const l of lines) expect(l.message).toMatch(/^apphost: no logs from this replica: /);
  });

  it('finds nothing for a project without a namespace or an app without pods', async () => {
    expect(await source.read('no-such-project', 'hello', {}, 100)).toEqual([]);
    expect(await source.read(project, 'nothing', {}, 100)).toEqual([]);
  });

  it('a follow with nothing to read ends when its signal aborts', async () => {
    const abort = new AbortController();
    const it = source.follow(project, 'hello', {}, abort.signal)[Symbol.asyncIterator]();
    const next = it.next();
    abort.abort();
    expect(await next).toEqual({ done: true, value: undefined });
  });
});
