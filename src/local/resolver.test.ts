import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createLocalResolver, type LocalAppEndpoint, normalizeHost } from './resolver.ts';

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
});
