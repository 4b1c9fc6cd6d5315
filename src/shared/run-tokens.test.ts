import { importJWK, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  createRunTokenVerifier,
  DEFAULT_RUN_TOKEN_LEEWAY_SECONDS,
  generateSigningKey,
  issueRunToken,
  type KeySet,
  RUN_TOKEN_AUDIENCE,
  RUN_TOKEN_ISSUER,
} from './run-tokens.ts';

const T0 = new Date('2030-01-01T00:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

/** A token signed with the real key, with claims an attacker (or a buggy issuer) chose. */
async function forge(set: KeySet, claims: Record<string, unknown>): Promise<string> {
  const key = set.keys[0];
  if (!key) throw new Error('no key');
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'EdDSA', kid: key.kid, typ: 'JWT' })
    .sign(await importJWK(key.privateJwk, 'EdDSA'));
}

describe('run-token verification', async () => {
  const set: KeySet = { keys: [await generateSigningKey(T0)] };
  const verifierAt = (seconds: number) => createRunTokenVerifier(() => set, { now: () => at(seconds) });
  const base = (over: Record<string, unknown> = {}) => ({
    iss: RUN_TOKEN_ISSUER,
    aud: RUN_TOKEN_AUDIENCE,
    project: 'shop',
    sub: 'project:shop',
    iat: Math.floor(T0.getTime() / 1000),
    exp: Math.floor(T0.getTime() / 1000) + 6,
    ...over,
  });

  it('accepts a token until its exp plus the small leeway, and not after', async () => {
    const token = await issueRunToken(set, 'shop', at(6), T0);
    expect((await verifierAt(6 + DEFAULT_RUN_TOKEN_LEEWAY_SECONDS - 1)(token)).projectId).toBe('shop');
    await expect(verifierAt(6 + DEFAULT_RUN_TOKEN_LEEWAY_SECONDS + 1)(token)).rejects.toThrow(/exp/);
    // The attack's case: a 6 s token still worked 36 s after it was minted.
    await expect(verifierAt(36)(token)).rejects.toThrow(/exp/);
  });

  it('honours a configured leeway, down to none', async () => {
    const token = await issueRunToken(set, 'shop', at(6), T0);
    const strict = createRunTokenVerifier(() => set, { now: () => at(7), leewaySeconds: 0 });
    await expect(strict(token)).rejects.toThrow(/exp/);
  });

  it('refuses an iat further ahead than the leeway', async () => {
    const future = await forge(set, base({ iat: Math.floor(T0.getTime() / 1000) + 60, exp: 2e9 }));
    await expect(verifierAt(0)(future)).rejects.toThrow(/future/);
    const slightlyAhead = await forge(set, base({ iat: Math.floor(T0.getTime() / 1000) + 2 }));
    expect((await verifierAt(0)(slightlyAhead)).projectId).toBe('shop');
  });

  it('refuses a sub that is not the project claim, and a token without iat or sub', async () => {
    await expect(verifierAt(0)(await forge(set, base({ sub: 'project:other' })))).rejects.toThrow(/subject/);
    await expect(verifierAt(0)(await forge(set, base({ sub: 'shop' })))).rejects.toThrow(/subject/);
    await expect(verifierAt(0)(await forge(set, base({ iat: undefined })))).rejects.toThrow(/iat/);
    await expect(verifierAt(0)(await forge(set, base({ sub: undefined })))).rejects.toThrow(/sub/);
  });
});
