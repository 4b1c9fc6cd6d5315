import { describe, expect, it } from 'vitest';
import type { ApiError } from '../../shared/errors.ts';
import type { RunTokenClaims } from '../../shared/run-tokens.ts';
import type { GatewayState } from '../context.ts';
import { authorize, type VerifyRunToken } from './auth.ts';

const claims = (projectId: string): RunTokenClaims => ({
  projectId,
  expiresAt: new Date(4_000_000_000_000),
  tokenId: 'j',
});

const call = (authorization: string) => {
  const set: Record<string, string> = {};
  const ctx = {
    get: (name: string) => (name === 'authorization' ? authorization : ''),
    set: (k: string, v: string | string[]) => {
      set[k] = String(v);
    },
    state: { target: { projectId: 'shop', appName: 'hello', path: 'run' } } as GatewayState,
  };
  return { ctx, set };
};

/** The outcome of authorize, whether it answered at once or through a promise. */
const outcome = async (r: () => Promise<void> | undefined) => {
  try {
    const p = r();
    if (p) await p;
    return { ok: true as const };
  } catch (err) {
    return { ok: false as const, status: (err as ApiError).status, code: (err as ApiError).code };
  }
};

describe('authorize', () => {
  it('answers at once (no promise) when the verifier knows the token', () => {
    const { ctx } = call('Bearer tok');
    expect(authorize(ctx, () => claims('shop'))).toBeUndefined();
  });

  // The same outcomes whether the verifier answers at once (cached) or with a promise (verified now).
  const verifiers: Array<[string, (c: RunTokenClaims | Error) => VerifyRunToken]> = [
    [
      'at once',
      (c) => () => {
        if (c instanceof Error) throw c;
        return c;
      },
    ],
    ['with a promise', (c) => async () => (c instanceof Error ? Promise.reject(c) : c)],
  ];
  it.each(verifiers)('verifier answering %s: ok, another project 404, invalid 401', async (_, make) => {
    expect(await outcome(() => authorize(call('Bearer tok').ctx, make(claims('shop'))))).toEqual({
      ok: true,
    });
    expect(await outcome(() => authorize(call('Bearer tok').ctx, make(claims('other'))))).toEqual({
      ok: false,
      status: 404,
      code: 'not_found',
    });
    const bad = call('Bearer tok');
    expect(await outcome(() => authorize(bad.ctx, make(new Error('expired'))))).toEqual({
      ok: false,
      status: 401,
      code: 'unauthenticated',
    });
    expect(bad.set['WWW-Authenticate']).toBe('Bearer error="invalid_token"');
  });

  it('refuses a call without a bearer token before asking the verifier', async () => {
    const { ctx, set } = call('Basic abc');
    let asked = false;
    const r = await outcome(() =>
      authorize(ctx, () => {
        asked = true;
        return claims('shop');
      }),
    );
    expect(r).toEqual({ ok: false, status: 401, code: 'unauthenticated' });
    expect(asked).toBe(false);
    expect(set['WWW-Authenticate']).toBe('Bearer');
  });
});
