import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../shared/log.ts';
import { CallContext } from './call-context.ts';

const ctxFor = (host: string | undefined, url = '/v4/p/a/x?async=true') =>
  new CallContext(
    { headers: host === undefined ? {} : { host }, url } as IncomingMessage,
    {} as ServerResponse,
    { requestId: 'r', now: 0, log: silentLogger() },
  );

describe('CallContext', () => {
  it.each([
    ['api.example.test', 'api.example.test'],
    ['api.example.test:8080', 'api.example.test'],
    ['[::1]:8080', '[::1]'],
    ['[::1', ''],
    [undefined, ''],
  ])('takes the name of Host %s as %j', (host, name) => {
    expect(ctxFor(host).hostname).toBe(name);
  });

  it('splits the request target at the first ?', () => {
    const ctx = ctxFor('h', '/v4/p/a/x?async=true&q=?');
    expect(ctx.path).toBe('/v4/p/a/x');
    expect(ctx.querystring).toBe('async=true&q=?');
  });
});
