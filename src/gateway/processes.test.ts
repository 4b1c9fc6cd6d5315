import { describe, expect, it } from 'vitest';
import { MAX_GATEWAY_PROCESSES, parseGatewayEnv } from './config.ts';
import { gatewayProcessCount } from './processes.ts';

const base = { APPHOST_PLATFORM_KEY: 'unit-test-platform-key-0123' };

describe('APPHOST_GATEWAY_PROCESSES', () => {
  it('defaults to one process', () => {
    expect(parseGatewayEnv(base).APPHOST_GATEWAY_PROCESSES).toBe(1);
    expect(parseGatewayEnv({ ...base, APPHOST_GATEWAY_PROCESSES: '' }).APPHOST_GATEWAY_PROCESSES).toBe(1);
  });

  it('takes a count or auto', () => {
    expect(parseGatewayEnv({ ...base, APPHOST_GATEWAY_PROCESSES: '3' }).APPHOST_GATEWAY_PROCESSES).toBe(3);
    expect(parseGatewayEnv({ ...base, APPHOST_GATEWAY_PROCESSES: 'auto' }).APPHOST_GATEWAY_PROCESSES).toBe(
      'auto',
    );
  });

  it.each(['0', '-1', '1.5', 'two', String(MAX_GATEWAY_PROCESSES + 1)])(
    'refuses %s, naming the variable',
    (v) => {
      expect(() => parseGatewayEnv({ ...base, APPHOST_GATEWAY_PROCESSES: v })).toThrow(
        /APPHOST_GATEWAY_PROCESSES/,
      );
    },
  );

  it('auto is one process per CPU this process may use (at least 1)', () => {
    expect(gatewayProcessCount('auto', 2)).toBe(2);
    expect(gatewayProcessCount('auto', 1)).toBe(1);
    expect(gatewayProcessCount('auto', 0)).toBe(1);
    expect(gatewayProcessCount(4, 2)).toBe(4);
    expect(gatewayProcessCount('auto', 1000)).toBe(MAX_GATEWAY_PROCESSES);
  });
});
