import { describe, expect, it } from 'vitest';
import { ApiError } from '../../shared/errors.ts';
import type { GatewayState } from '../context.ts';
import { route } from './route.ts';

const run = async (path: string, method = 'POST') => {
  const headers: Record<string, string> = {};
  const ctx = {
    path,
    method,
    state: {} as GatewayState,
    set: (k: string, v: string) => {
      headers[k] = v;
    },
  };
  route(ctx);
  // It returned: the call goes on to auth.
  return { ctx, called: true };
};

describe('route', () => {
  it('parses project, app and the rest of the path', async () => {
    const { ctx, called } = await run('/v4/shop/hello/run');
    expect(called).toBe(true);
    expect(ctx.state.target).toEqual({ projectId: 'shop', appName: 'hello', path: 'run' });
  });

  it.each([
    ['/v4/a.b/c/run', 'a dotted project id'],
    ['/v4/a/b.c/run', 'a dotted app name'],
    ['/v4/Shop/hello/run', 'upper case'],
    ['/v4/shop/hello%2Ex/run', 'an encoded dot'],
    ['/v4/-shop/hello/run', 'a leading dash'],
  ])('answers %s (%s) with the unknown-app 404', async (path) => {
    const err = await run(path).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(404);
    expect((err as ApiError).message).toMatch(/^no app /);
  });

  it('refuses other methods with 405', async () => {
    const err = await run('/v4/shop/hello/run', 'GET').catch((e: unknown) => e);
    expect((err as ApiError).status).toBe(405);
  });
});
