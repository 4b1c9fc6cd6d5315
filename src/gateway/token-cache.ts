/**
 * Remembers run tokens that verified, so a caller's repeated calls skip the Ed25519 verification
 * (the largest CPU cost of a sync call in profiles). Only successes are cached; an entry lives until
 * the token expires or `ttlMs` passes, whichever is first — so a key removed from the key set stops
 * being honoured at most `ttlMs` later.
 */
import { createHash } from 'node:crypto';
import { sameStringInConstantTime } from '../shared/constant-time.ts';
import type { MaybePromise } from '../shared/contracts/seams.ts';
import type { RunTokenClaims, RunTokenVerifier } from '../shared/run-tokens.ts';

/** The cache's defaults (APPHOST_RUN_TOKEN_CACHE_TTL_MS, APPHOST_RUN_TOKEN_CACHE_MAX_ENTRIES). */
export const DEFAULT_RUN_TOKEN_CACHE = { ttlMs: 60_000, maxEntries: 10_000 } as const;

/** A token the cache just remembered, as the native data plane's `token` frame carries it. */
export interface RememberedToken {
  /** SHA-256 of the whole token's UTF-8, as 64 lower-case hex digits. */
  sha256: string;
  projectId: string;
  /** Epoch ms when the cache entry expires: the earlier of the ttl and the token's own expiry. */
  until: number;
}

/** Claims of a cached token come back at once, not as a promise; a token not cached is verified. */
export function cachedRunTokenVerifier(
  verify: RunTokenVerifier,
  opts: {
    ttlMs: number;
    maxEntries: number;
    now?: () => number;
    /**
     * Called with each token that verified and was cached (a miss, never a hit), after it is cached.
     * Entries dropped early (the oldest, when full) are not reported: a copy keeps each to its `until`.
     * Never called when the cache is off (`ttlMs` or `maxEntries` ≤ 0).
     */
    onRemember?: (t: RememberedToken) => void;
  },
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
    const until = Number.isFinite(exp) ? Math.min(t + opts.ttlMs, exp) : t + opts.ttlMs;
    cache.set(token, { claims, until });
    // Hashed only here, on a miss (after an Ed25519 verification that costs far more), and only when asked.
    opts.onRemember?.({
      sha256: createHash('sha256').update(token, 'utf8').digest('hex'),
      projectId: claims.projectId,
      until,
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
