/**
 * Remembers run tokens that verified, so a caller's repeated calls skip the Ed25519 verification
 * (the largest CPU cost of a sync call in profiles). Only successes are cached; an entry lives until
 * the token expires or `ttlMs` passes, whichever is first — so a key removed from the key set stops
 * being honoured at most `ttlMs` later.
 */
import { sameStringInConstantTime } from '../shared/constant-time.ts';
import type { MaybePromise } from '../shared/contracts/seams.ts';
import type { RunTokenClaims, RunTokenVerifier } from '../shared/run-tokens.ts';

/** Claims of a cached token come back at once, not as a promise; a token not cached is verified. */
export function cachedRunTokenVerifier(
  verify: RunTokenVerifier,
  opts: { ttlMs: number; maxEntries: number; now?: () => number },
): (token: string) => MaybePromise<RunTokenClaims> {
  if (opts.ttlMs <= 0 || opts.maxEntries <= 0) return verify;
  const now = opts.now ?? Date.now;
  type Entry = { claims: RunTokenClaims; until: number };
  const cache = new Map<string, Entry>();
  // The token last answered from the cache: a caller's repeated calls are matched by comparing the
  // strings, without hashing the token (a few hundred characters, a new string per call) for the Map.
  // A live bearer token against what a caller sent: compared in constant time, not with `===`, which
  // stops at the first differing character.
  let lastToken: string | undefined;
  let lastEntry: Entry | undefined;
  const forget = (token: string): void => {
    cache.delete(token);
    if (token === lastToken) lastToken = lastEntry = undefined;
  };
  const remember = (token: string, claims: RunTokenClaims, t: number): RunTokenClaims => {
    if (cache.size >= opts.maxEntries) {
      // Map iterates in insertion order: drop the oldest entry.
      const oldest = cache.keys().next().value;
      if (oldest !== undefined) forget(oldest);
    }
    const exp = claims.expiresAt.getTime();
    cache.set(token, {
      claims,
      until: Number.isFinite(exp) ? Math.min(t + opts.ttlMs, exp) : t + opts.ttlMs,
    });
    return claims;
  };
  return (token) => {
    const hit =
      lastToken !== undefined && sameStringInConstantTime(token, lastToken) ? lastEntry : cache.get(token);
    const t = now();
    if (hit && hit.until > t) {
      if (hit !== lastEntry) {
        lastToken = token;
        lastEntry = hit;
      }
      return hit.claims;
    }
    if (hit) forget(token);
    return verify(token).then((claims) => remember(token, claims, t));
  };
}
