import { describe, expect, it } from 'vitest';
import type { AppResolver } from '../../shared/contracts/seams.ts';
import type { GatewayState } from '../context.ts';
import { customDomain } from './custom-domain.ts';

const ctxFor = (hostname: string, path: string) => ({ hostname, path, state: {} as GatewayState });
const hosts: Record<string, { projectId: string; appName: string }> = {
  'api.example.com': { projectId: 'shop', appName: 'hello' },
};
const atOnce: AppResolver = { resolve: () => undefined, resolveHost: (h) => hosts[h] };
const later: AppResolver = { resolve: async () => undefined, resolveHost: async (h) => hosts[h] };

describe('customDomain', () => {
  it('routes an assigned domain at once when the resolver answers at once', () => {
    const ctx = ctxFor('API.example.com', '//run/x');
    expect(customDomain(ctx, atOnce)).toBeUndefined();
    expect(ctx.state).toEqual({
      viaDomain: true,
      target: { projectId: 'shop', appName: 'hello', path: 'run/x' },
    });
  });

  it('routes it the same through a promise when the resolver answers with one', async () => {
    const ctx = ctxFor('api.example.com', '/run');
    const p = customDomain(ctx, later);
    expect(p).toBeInstanceOf(Promise);
    await p;
    expect(ctx.state.target).toEqual({ projectId: 'shop', appName: 'hello', path: 'run' });
  });

  it.each([
    ['at once', atOnce],
    ['with a promise', later],
  ])('leaves another host (or none) to the normal routes, resolver answering %s', async (_, resolver) => {
    for (const host of ['other.example.com', '']) {
      const ctx = ctxFor(host, '/v4/shop/hello/run');
      await customDomain(ctx, resolver);
      expect(ctx.state).toEqual({});
    }
  });
});
