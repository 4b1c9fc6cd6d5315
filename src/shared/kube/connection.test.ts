import { HttpMethod, KubeConfig, RequestContext } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { reuseKubeConnections } from './connection.ts';

function config(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

async function dispatcherOf(kc: KubeConfig) {
  const ctx = new RequestContext('https://127.0.0.1:6443/api', HttpMethod.GET);
  await kc.applySecurityAuthentication(ctx);
  return ctx.getDispatcher();
}

describe('reuseKubeConnections', () => {
  it('shows client-node builds a new agent per request, and the patch shares one until renewal', async () => {
    const plain = config();
    const a = await dispatcherOf(plain);
    expect(a).toBeDefined();
    expect(await dispatcherOf(plain)).not.toBe(a);

    let t = 0;
    const kc = reuseKubeConnections(config(), () => t, 1000);
    expect(reuseKubeConnections(kc)).toBe(kc);
    const first = await dispatcherOf(kc);
    expect(await dispatcherOf(kc)).toBe(first);
    t = 1001;
    const renewed = await dispatcherOf(kc);
    expect(renewed).not.toBe(first);
    expect(await dispatcherOf(kc)).toBe(renewed);
  });
});
