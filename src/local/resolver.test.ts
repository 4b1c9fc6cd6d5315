import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryStore } from '../management/store/memory.ts';
import { createLocalResolver, type LocalAppEndpoint, normalizeHost, storeDomainLookup } from './resolver.ts';

/** A real HTTP server standing in for a runtime: /ready and /functions as the Python runtime answers them. */
async function fakeRuntime(state: {
  ready: boolean;
  functions: string[];
  functionCalls: number;
}): Promise<Server> {
  const srv = createServer((req, res) => {
    if (req.url === '/ready') res.writeHead(state.ready ? 200 : 503).end();
    else if (req.url === '/functions') {
      state.functionCalls++;
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ functions: state.functions.map((name) => ({ name, streaming: false })) }));
    } else res.writeHead(404).end();
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return srv;
}

describe('normalizeHost', () => {
  it.each([
    ['Hello.LocalHost:8080', 'hello.localhost'],
    ['hello.localhost.', 'hello.localhost'],
    ['[::1]:80', '[::1]'],
    ['plain', 'plain'],
  ])('%s -> %s', (input, want) => expect(normalizeHost(input)).toBe(want));
});

describe('createLocalResolver', () => {
  let srv: Server | undefined;
  afterEach(() => new Promise<void>((r) => (srv ? srv.close(() => r()) : r())));

  it('resolves a ready app to its loopback port with its functions, cached per process start', async () => {
    const state = { ready: true, functions: ['run'], functionCalls: 0 };
    srv = await fakeRuntime(state);
    const port = (srv.address() as { port: number }).port;
    const ep: LocalAppEndpoint = {
      runtime: 'cortex',
      port,
      gracePeriodSeconds: 60,
      readinessPath: '/ready',
      generation: 1,
    };
    const resolver = createLocalResolver({
      projectId: 'local',
      endpoint: (name) => (name === 'hello' ? ep : undefined),
      domains: { appForHost: async () => undefined },
    });
    expect(await resolver.resolve('local', 'hello')).toEqual({
      projectId: 'local',
      appName: 'hello',
      runtime: 'cortex',
      upstream: `http://127.0.0.1:${port}`,
      ready: true,
      gracePeriodSeconds: 60,
      functions: ['run'],
    });
    await resolver.resolve('local', 'hello');
    expect(state.functionCalls).toBe(1);
    // a restarted process may export other functions
    state.functions = ['run', 'other'];
    ep.generation = 2;
    expect((await resolver.resolve('local', 'hello'))?.functions).toEqual(['run', 'other']);
    expect(state.functionCalls).toBe(2);
  });

  it('reports a starting app as not ready, and unknown apps and projects as absent', async () => {
    const state = { ready: false, functions: [], functionCalls: 0 };
    srv = await fakeRuntime(state);
    const port = (srv.address() as { port: number }).port;
    const resolver = createLocalResolver({
      projectId: 'local',
      endpoint: (name) =>
        name === 'hello'
          ? { runtime: 'cortex', port, gracePeriodSeconds: 900, readinessPath: '/ready', generation: 1 }
          : name === 'down'
            ? { runtime: 'cortex', port: 1, gracePeriodSeconds: 900, readinessPath: '/ready', generation: 1 }
            : undefined,
      domains: { appForHost: async () => undefined },
    });
    expect(await resolver.resolve('local', 'hello')).toMatchObject({ ready: false });
    expect((await resolver.resolve('local', 'hello'))?.functions).toBeUndefined();
    expect(await resolver.resolve('local', 'down')).toMatchObject({ ready: false });
    expect(await resolver.resolve('local', 'nope')).toBeUndefined();
    expect(await resolver.resolve('other', 'hello')).toBeUndefined();
  });

  it('resolves custom domains through the domain lookup, normalising the Host header', async () => {
    const assigned = new Map([['hello.localhost', 'hello']]);
    const resolver = createLocalResolver({
      projectId: 'local',
      endpoint: () => undefined,
      domains: {
        appForHost: async (projectId, host) => (projectId === 'local' ? assigned.get(host) : undefined),
      },
    });
    expect(await resolver.resolveHost('Hello.Localhost:8080')).toEqual({
      projectId: 'local',
      appName: 'hello',
    });
    assigned.delete('hello.localhost');
    expect(await resolver.resolveHost('hello.localhost')).toBeUndefined();
  });

  it('reports every host resolveHost answers for to watchDomains, and each change of the store (native mode)', async () => {
    const store = createMemoryStore();
    store.addProject('local');
    store.addProject('other');
    await store.createDomain('local', { domainId: 'a', hostname: 'a.localhost' });
    await store.assignDomain('local', 'a', 'hello');
    const resolver = createLocalResolver({
      projectId: 'local',
      endpoint: () => undefined,
      domains: storeDomainLookup(store),
    });
    const map = new Map<string, string>();
    const calls: Array<[string, string | undefined]> = [];
    const stop = resolver.watchDomains?.({
      setDomain(host, target) {
        calls.push([host, target?.appName]);
        if (target) map.set(host, `${target.projectId}/${target.appName}`);
        else map.delete(host);
      },
    });
    /** What the data plane's map must hold: the hosts resolveHost routes, and only those. */
    const answered = async (hosts: string[]) => {
      const out = new Map<string, string>();
      for (const h of hosts) {
        const hit = await resolver.resolveHost(h);
        if (hit) out.set(h, `${hit.projectId}/${hit.appName}`);
      }
      return out;
    };
    const hosts = ['a.localhost', 'b.localhost', 'c.localhost'];
    expect(map).toEqual(await answered(hosts));
    expect(map).toEqual(new Map([['a.localhost', 'local/hello']]));

    await store.createDomain('local', { domainId: 'b', hostname: 'b.localhost' });
    expect(map).toEqual(await answered(hosts)); // created, not assigned: not routed
    await store.assignDomain('local', 'b', 'stream');
    await store.assignDomain('local', 'a', 'stream'); // moved
    expect(map).toEqual(await answered(hosts));
    expect(map.get('a.localhost')).toBe('local/stream');
    await store.unassignDomain('local', 'b');
    expect(map).toEqual(await answered(hosts));
    await store.deleteDomain('local', 'a');
    expect(map).toEqual(new Map());
    // another project's domains are not this resolver's
    await store.createDomain('other', { domainId: 'c', hostname: 'c.localhost' });
    await store.assignDomain('other', 'c', 'x');
    expect(map).toEqual(new Map());

    const before = calls.length;
    stop?.();
    await store.createDomain('local', { domainId: 'd', hostname: 'd.localhost' });
    await store.assignDomain('local', 'd', 'hello');
    expect(calls.length).toBe(before);
  });

  it('has no watchDomains without a lookup that watches', () => {
    const resolver = createLocalResolver({
      projectId: 'local',
      endpoint: () => undefined,
      domains: { appForHost: async () => undefined },
    });
    expect(resolver.watchDomains).toBeUndefined();
  });
});
