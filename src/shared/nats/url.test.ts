import { describe, expect, it } from 'vitest';
import { natsServers } from './url.ts';

describe('natsServers', () => {
  it('splits a comma-separated cluster list and keeps a single URL as is', () => {
    expect(natsServers('nats://a:4222, nats://b:4222,nats://c:4222')).toEqual([
      'nats://a:4222',
      'nats://b:4222',
      'nats://c:4222',
    ]);
    expect(natsServers('nats://127.0.0.1:4222')).toEqual(['nats://127.0.0.1:4222']);
    expect(() => natsServers(' , ')).toThrow(/no server/);
  });
});
