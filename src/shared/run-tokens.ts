/**
 * Run tokens: the JWTs callers present to the run endpoint (`Authorization: Bearer <JWT>`).
 * Issued by the management API, verified by the gateway. Keys are Ed25519; a key set holds the
 * signing key first and previous keys after it, so rotation keeps earlier tokens valid until expiry.
 */

import { randomUUID } from 'node:crypto';
// jose's subpath exports, not its index: the index loads all of jose (JWE, remote key sets, ...), ~4.5 MiB
// of a gateway's memory for nothing (docs/benchmarks.md#memory-of-the-gateway).
import type { JWK } from 'jose';
import { createLocalJWKSet } from 'jose/jwks/local';
import { SignJWT } from 'jose/jwt/sign';
import { jwtVerify } from 'jose/jwt/verify';
import { exportJWK } from 'jose/key/export';
import { generateKeyPair } from 'jose/key/generate/keypair';
import { importJWK } from 'jose/key/import';

export const RUN_TOKEN_ISSUER = 'apphost';
export const RUN_TOKEN_AUDIENCE = 'apphost:run';
/**
 * Clock skew tolerated when checking `exp`, `nbf` and `iat` (gateway: APPHOST_RUN_TOKEN_LEEWAY_SECONDS).
 * Small on purpose: every second of it is a second a token outlives its `exp`.
 */
export const DEFAULT_RUN_TOKEN_LEEWAY_SECONDS = 5;
/** The largest leeway the setting accepts. */
export const MAX_RUN_TOKEN_LEEWAY_SECONDS = 10;
export const runTokenSubject = (projectId: string) => `project:${projectId}`;

export interface SigningKey {
  kid: string;
  /** Private Ed25519 key as a JWK (contains `d`). */
  privateJwk: JWK;
  createdAt: string;
}

/** Stored form (Kubernetes Secret key `run-token-keys.json`, or a file in local mode). */
export interface KeySet {
  keys: SigningKey[];
}

/** The Secret in the platform namespace that holds the key set (the management API creates it). */
export const RUN_TOKEN_KEYS_SECRET = 'apphost-run-token-keys';
export const RUN_TOKEN_KEYS_SECRET_KEY = 'run-token-keys.json';

/** A stored key set, checked enough to verify with: `where` names its origin in the error. */
export function parseKeySet(json: string, where: string): KeySet {
  const parsed = JSON.parse(json) as KeySet;
  if (!Array.isArray(parsed?.keys) || parsed.keys.length === 0) throw new Error(`${where}: no keys`);
  return parsed;
}

export async function generateSigningKey(now = new Date()): Promise<SigningKey> {
  const { privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const privateJwk = await exportJWK(privateKey);
  return { kid: randomUUID(), privateJwk: { ...privateJwk, alg: 'EdDSA' }, createdAt: now.toISOString() };
}

/** A new key set with `fresh` in front; keeps at most `keep` keys so old ones age out. */
export function rotate(set: KeySet, fresh: SigningKey, keep = 3): KeySet {
  return { keys: [fresh, ...set.keys].slice(0, keep) };
}

export function publicJwks(set: KeySet): { keys: JWK[] } {
  return {
    keys: set.keys.map(({ kid, privateJwk }) => {
      const { d: _d, ...pub } = privateJwk;
      return { ...pub, kid, alg: 'EdDSA', use: 'sig' };
    }),
  };
}

export interface RunTokenClaims {
  projectId: string;
  expiresAt: Date;
  tokenId: string;
}

export async function issueRunToken(
  set: KeySet,
  projectId: string,
  expiresAt: Date,
  now: Date = new Date(),
): Promise<string> {
  const key = set.keys[0];
  if (!key) throw new Error('no signing key');
  const privateKey = await importJWK(key.privateJwk, 'EdDSA');
  return new SignJWT({ project: projectId })
    .setProtectedHeader({ alg: 'EdDSA', kid: key.kid, typ: 'JWT' })
    .setIssuer(RUN_TOKEN_ISSUER)
    .setAudience(RUN_TOKEN_AUDIENCE)
    .setSubject(runTokenSubject(projectId))
    .setJti(randomUUID())
    .setIssuedAt(Math.floor(now.getTime() / 1000))
    .setExpirationTime(Math.floor(expiresAt.getTime() / 1000))
    .sign(privateKey);
}

export class RunTokenError extends Error {
  readonly code = 'invalid_run_token';
}

export type RunTokenVerifier = (token: string) => Promise<RunTokenClaims>;

/**
 * `keys` is read on each call so a rotated key set takes effect without a restart. A token is refused
 * once `exp` is more than `leewaySeconds` past, when its `iat` is more than `leewaySeconds` ahead (a
 * token "from the future" would otherwise live longer than it was issued for), and when `sub` is not the
 * subject of its `project` claim.
 */
export function createRunTokenVerifier(
  keys: () => KeySet,
  opts: { now?: () => Date; leewaySeconds?: number } = {},
): RunTokenVerifier {
  const now = opts.now ?? (() => new Date());
  const leeway = opts.leewaySeconds ?? DEFAULT_RUN_TOKEN_LEEWAY_SECONDS;
  let cachedFor: KeySet | undefined;
  let jwks: ReturnType<typeof createLocalJWKSet> | undefined;
  return async (token) => {
    const set = keys();
    if (set !== cachedFor || !jwks) {
      jwks = createLocalJWKSet(publicJwks(set));
      cachedFor = set;
    }
    try {
      const at = now();
      const { payload } = await jwtVerify(token, jwks, {
        issuer: RUN_TOKEN_ISSUER,
        audience: RUN_TOKEN_AUDIENCE,
        algorithms: ['EdDSA'],
        clockTolerance: leeway,
        currentDate: at,
        requiredClaims: ['exp', 'iat', 'sub', 'project'],
      });
      if (typeof payload.project !== 'string' || payload.project === '') {
        throw new RunTokenError('token has no project');
      }
      if ((payload.iat as number) > at.getTime() / 1000 + leeway) {
        throw new RunTokenError('token is issued in the future');
      }
      if (payload.sub !== runTokenSubject(payload.project)) {
        throw new RunTokenError('token subject does not match its project');
      }
      return {
        projectId: payload.project,
        expiresAt: new Date((payload.exp ?? 0) * 1000),
        tokenId: String(payload.jti ?? ''),
      };
    } catch (err) {
      if (err instanceof RunTokenError) throw err;
      throw new RunTokenError(`run token rejected: ${(err as Error).message}`, { cause: err });
    }
  };
}
