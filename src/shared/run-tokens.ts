/**
 * Run tokens: the JWTs callers present to the run endpoint (`Authorization: Bearer <JWT>`).
 * Issued by the management API, verified by the gateway. Keys are Ed25519; a key set holds the
 * signing key first and previous keys after it, so rotation keeps earlier tokens valid until expiry.
 */

import { randomUUID } from 'node:crypto';
import { createLocalJWKSet, exportJWK, generateKeyPair, importJWK, type JWK, jwtVerify, SignJWT } from 'jose';

export const RUN_TOKEN_ISSUER = 'apphost';
export const RUN_TOKEN_AUDIENCE = 'apphost:run';
/** Clock skew tolerated when checking exp/nbf. */
export const RUN_TOKEN_CLOCK_TOLERANCE_SECONDS = 30;

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
    .setSubject(`project:${projectId}`)
    .setJti(randomUUID())
    .setIssuedAt(Math.floor(now.getTime() / 1000))
    .setExpirationTime(Math.floor(expiresAt.getTime() / 1000))
    .sign(privateKey);
}

export class RunTokenError extends Error {
  readonly code = 'invalid_run_token';
}

export type RunTokenVerifier = (token: string) => Promise<RunTokenClaims>;

/** `keys` is read on each call so a rotated key set takes effect without a restart. */
export function createRunTokenVerifier(
  keys: () => KeySet,
  now: () => Date = () => new Date(),
): RunTokenVerifier {
  let cachedFor: KeySet | undefined;
  let jwks: ReturnType<typeof createLocalJWKSet> | undefined;
  return async (token) => {
    const set = keys();
    if (set !== cachedFor || !jwks) {
      jwks = createLocalJWKSet(publicJwks(set));
      cachedFor = set;
    }
    try {
      const { payload } = await jwtVerify(token, jwks, {
        issuer: RUN_TOKEN_ISSUER,
        audience: RUN_TOKEN_AUDIENCE,
        algorithms: ['EdDSA'],
        clockTolerance: RUN_TOKEN_CLOCK_TOLERANCE_SECONDS,
        currentDate: now(),
        requiredClaims: ['exp', 'project'],
      });
      if (typeof payload.project !== 'string' || payload.project === '') {
        throw new RunTokenError('token has no project');
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
