import { describe, expect, it } from 'vitest';
import { parseDevOptions } from './options.ts';

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
