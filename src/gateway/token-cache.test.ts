import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { RunTokenClaims } from '../shared/run-tokens.ts';
import { cachedRunTokenVerifier, type RememberedToken } from './token-cache.ts';

describe('cachedRunTokenVerifier', () => {
  const claims = (exp: number): RunTokenClaims => ({
    projectId: 'p',
    expiresAt: new Date(exp),
    tokenId: 'j',
  });

  it('verifies once per token within the ttl, again after it, and never past expiry', async () => {
    let t = 1_000;
    const calls: string[] = [];
    const v = cachedRunTokenVerifier(
      async (tok) => {
        calls.push(tok);
        return claims(tok === 'short' ? 1_500 : 100_000);
      },
      { ttlMs: 10_000, maxEntries: 10, now: () => t },
    );
    await v('a');
    await v('a');
    expect(calls).toEqual(['a']);
    t = 12_000;
    await v('a');
    expect(calls).toEqual(['a', 'a']);
    await v('short');
    t = 12_000 + 1; // past the token's own expiry
    await v('short');
    expect(calls.filter((c) => c === 'short')).toHaveLength(2);
  });

  it('never caches a failure and evicts the oldest entry when full', async () => {
    const calls: string[] = [];
    const v = cachedRunTokenVerifier(
      async (tok) => {
        calls.push(tok);
        if (tok === 'bad') throw new Error('invalid');
        return claims(4_000_000_000_000);
      },
      { ttlMs: 60_000, maxEntries: 2 },
    );
    await expect(v('bad')).rejects.toThrow();
    await expect(v('bad')).rejects.toThrow();
    await v('x');
    await v('y');
    await v('z'); // evicts x
    await v('y');
    await v('x');
    expect(calls).toEqual(['bad', 'bad', 'x', 'y', 'z', 'x']);
  });

  it('is a pass-through when disabled', async () => {
    let n = 0;
    const v = cachedRunTokenVerifier(
      async () => {
        n++;
        return claims(4_000_000_000_000);
      },
      { ttlMs: 0, maxEntries: 10 },
    );
    await v('a');
    await v('a');
    expect(n).toBe(2);
  });

  it('answers a cached token at once, not with a promise; a token not cached with one', async () => {
    const v = cachedRunTokenVerifier(async () => claims(4_000_000_000_000), {
      ttlMs: 10_000,
      maxEntries: 10,
    });
    const first = v('a');
    expect(first).toBeInstanceOf(Promise);
    await first;
    expect(v('a')).toEqual(claims(4_000_000_000_000));
    expect(v('b')).toBeInstanceOf(Promise);
  });
});

describe('cachedRunTokenVerifier: the token last answered', () => {
  const claimsOf = (projectId: string): RunTokenClaims => ({
    projectId,
    expiresAt: new Date(4_000_000_000_000),
    tokenId: projectId,
  });

  it('answers each token with its own claims when callers alternate', async () => {
    const v = cachedRunTokenVerifier(async (tok) => claimsOf(`project-of-${tok}`), {
      ttlMs: 60_000,
      maxEntries: 10,
    });
    await v('a');
    await v('b');
    for (const tok of ['a', 'a', 'b', 'a', 'b', 'b', 'c']) {
      expect((await v(tok)).projectId).toBe(`project-of-${tok}`);
    }
  });

  it('verifies again once the repeated token is past its ttl or evicted', async () => {
    let t = 1_000;
    const calls: string[] = [];
    const v = cachedRunTokenVerifier(
      async (tok) => {
        calls.push(tok);
        return claimsOf(tok);
      },
      { ttlMs: 10_000, maxEntries: 2, now: () => t },
    );
    await v('x');
    v('x');
    v('x'); // the last answered
    t = 11_001;
    await v('x'); // past its ttl: verified again
    expect(calls).toEqual(['x', 'x']);
    v('x');
    await v('y');
    await v('z'); // evicts x, the last answered
    await v('x');
    expect(calls).toEqual(['x', 'x', 'y', 'z', 'x']);
  });
});

describe('cachedRunTokenVerifier: onRemember', () => {
  it('reports each token cached on a miss (digest of the whole token, project, entry expiry), never a hit or a failure', async () => {
    let t = 1_000;
    const remembered: RememberedToken[] = [];
    const v = cachedRunTokenVerifier(
      async (tok) => {
        if (tok === 'bad') throw new Error('invalid');
        return {
          projectId: `p-${tok.length}`,
          expiresAt: new Date(tok === 'ä-short' ? 5_000 : 4e12),
          tokenId: 'j',
        };
      },
      { ttlMs: 10_000, maxEntries: 10, now: () => t, onRemember: (r) => remembered.push(r) },
    );
    await v('tok');
    v('tok');
    await expect(v('bad')).rejects.toThrow();
    await v('ä-short'); // non-ASCII: hashed as UTF-8; its own expiry is before the ttl
    expect(remembered).toEqual([
      {
        sha256: createHash('sha256').update(Buffer.from('tok', 'utf8')).digest('hex'),
        projectId: 'p-3',
        until: 11_000,
      },
      {
        sha256: createHash('sha256').update(Buffer.from('ä-short', 'utf8')).digest('hex'),
        projectId: 'p-7',
        until: 5_000,
      },
    ]);
    expect(remembered[0]?.sha256).toMatch(/^[0-9a-f]{64}$/);
    t = 11_000; // the entry expired: verified and reported again, with a new until
    await v('tok');
    expect(remembered.map((r) => r.until)).toEqual([11_000, 5_000, 21_000]);
  });
});
