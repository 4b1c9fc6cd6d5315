import { describe, expect, it } from 'vitest';
import { parseGatewayEnv } from '../config.ts';
import { dataPlaneConfig, HANDOFF_MARGIN_MS } from './config-frame.ts';
import { encodePayload, parsePayload } from './protocol.ts';

const base = { APPHOST_PLATFORM_KEY: 'unit-test-platform-key-0123' };

describe('APPHOST_GATEWAY_DATA_PLANE', () => {
  it('defaults to node, with the documented binary, folder and one thread', () => {
    const cfg = parseGatewayEnv(base);
    expect(cfg.APPHOST_GATEWAY_DATA_PLANE).toBe('node');
    expect(cfg.APPHOST_GATEWAY_DATA_PLANE_BIN).toBe('/app/bin/apphost-dataplane');
    expect(cfg.APPHOST_GATEWAY_DATA_PLANE_DIR).toBe('/run/apphost');
    expect(cfg.APPHOST_GATEWAY_DATA_PLANE_THREADS).toBe(1);
  });

  it.each(['2', 'auto'])('refuses native with APPHOST_GATEWAY_PROCESSES=%s, naming both variables', (n) => {
    expect(() =>
      parseGatewayEnv({ ...base, APPHOST_GATEWAY_DATA_PLANE: 'native', APPHOST_GATEWAY_PROCESSES: n }),
    ).toThrow(/APPHOST_GATEWAY_DATA_PLANE: 'native' needs APPHOST_GATEWAY_PROCESSES=1/);
    expect(
      parseGatewayEnv({ ...base, APPHOST_GATEWAY_DATA_PLANE: 'node', APPHOST_GATEWAY_PROCESSES: n })
        .APPHOST_GATEWAY_PROCESSES,
    ).toBe(n === 'auto' ? 'auto' : 2);
  });

  it.each([
    ['APPHOST_GATEWAY_DATA_PLANE', 'rust'],
    ['APPHOST_GATEWAY_DATA_PLANE_THREADS', '0'],
    ['APPHOST_GATEWAY_DATA_PLANE_THREADS', '65'],
  ])('refuses %s=%s', (name, v) => {
    expect(() => parseGatewayEnv({ ...base, [name]: v })).toThrow(new RegExp(name));
  });
});

describe('the config frame', () => {
  it('carries the parsed settings, and the data plane reads it as sent', () => {
    const cfg = parseGatewayEnv({
      ...base,
      APPHOST_GATEWAY_DATA_PLANE: 'native',
      APPHOST_GATEWAY_PORT: '8081',
      APPHOST_GATEWAY_HOST: '127.0.0.1',
      APPHOST_GATEWAY_MAX_BODY_BYTES: '1000',
      APPHOST_GATEWAY_DRAIN_TIMEOUT_MS: '7000',
      APPHOST_GATEWAY_COLD_START_TIMEOUT_MS: '9000',
      APPHOST_GATEWAY_ROUTING: 'service',
      APPHOST_GATEWAY_MAX_RETRIES: '5',
      APPHOST_RUN_TOKEN_CACHE_MAX_ENTRIES: '77',
      APPHOST_LOG_LEVEL: 'warn',
    });
    const m = dataPlaneConfig(cfg, '/run/apphost/handoff.sock');
    expect(parsePayload(encodePayload(m), 'dataplane')).toEqual(m);
    expect(m).toMatchObject({
      listen: { host: '127.0.0.1', port: 8081 },
      handoffSocket: '/run/apphost/handoff.sock',
      gateway: {
        maxBodyBytes: 1000,
        drainTimeoutMs: 7000,
        coldStartTimeoutMs: 9000,
        handoffMarginMs: HANDOFF_MARGIN_MS,
      },
      balancer: { routing: 'service', maxRetries: 5 },
      tokenCacheMaxEntries: 77,
      logLevel: 'warn',
    });
  });

  it('says routing service when the resolver reports no replicas (Node then calls the app as a whole)', () => {
    const cfg = parseGatewayEnv({ ...base, APPHOST_GATEWAY_ROUTING: 'endpoints' });
    expect(dataPlaneConfig(cfg, '/x/handoff.sock').balancer.routing).toBe('endpoints');
    expect(dataPlaneConfig(cfg, '/x/handoff.sock', false).balancer.routing).toBe('service');
  });

  it('sends a token table of 0 when the token cache is off (Node remembers nothing to push)', () => {
    const cfg = parseGatewayEnv({ ...base, APPHOST_RUN_TOKEN_CACHE_TTL_MS: '0' });
    expect(dataPlaneConfig(cfg, '/x/handoff.sock').tokenCacheMaxEntries).toBe(0);
  });
});
