/**
 * Creating service accounts and checking their tokens. The token is returned once, at creation;
 * the store keeps only a SHA-256 of its secret.
 */
import { ApiError, ErrorCode } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import type { ManagementStore, ServiceAccount } from './store/types.ts';
import { formatToken, hashSecret, newTokenSecret, parseToken, secretMatches } from './tokens.ts';

export interface CreatedServiceAccount {
  account: ServiceAccount;
  /** Shown once; never stored, never logged. */
  token: string;
}

const DAY_MS = 86_400_000;

/** A service account's expiry: a valid date in the future, at most `maxDays` ahead when given. */
function checkExpiry(expiresAt: Date, now: Date, maxDays: number | undefined): void {
  if (Number.isNaN(expiresAt.getTime()))
    throw new ApiError(ErrorCode.InvalidBody, 'expires_at is not a valid date');
  if (expiresAt.getTime() <= now.getTime())
    throw new ApiError(ErrorCode.Unprocessable, 'expires_at must be in the future');
  if (maxDays !== undefined && expiresAt.getTime() - now.getTime() > maxDays * DAY_MS)
    throw new ApiError(ErrorCode.Unprocessable, `expires_at may be at most ${maxDays} days ahead`, {
      details: { maxDays },
    });
}

/**
 * The bootstrap path too (CLI `apphost create-service-account`): no caller token needed. `maxDays`
 * caps the lifetime (the API and the CLI pass APPHOST_MANAGEMENT_MAX_SERVICE_ACCOUNT_DAYS).
 */
export async function createServiceAccount(
  store: ManagementStore,
  projectId: string,
  name: string,
  expiresAt: Date,
  now: Date = new Date(),
  opts: { maxDays?: number } = {},
): Promise<CreatedServiceAccount> {
  checkExpiry(expiresAt, now, opts.maxDays);
  if (!(await store.projectExists(projectId)))
    throw new ApiError(ErrorCode.NotFound, `project ${projectId} not found`);
  const secret = newTokenSecret();
  const account = await store.createServiceAccount(projectId, {
    name,
    secretHash: hashSecret(secret),
    expiresAt: expiresAt.toISOString(),
    createdAt: now.toISOString(),
    lastUsedAt: undefined,
  });
  return { account, token: formatToken(projectId, name, secret) };
}

/**
 * A new token for an existing account (and a new expiry): the previous token is refused from the next
 * request on this replica (`auth.forget`), and within the auth cache bound on others. 404 when absent.
 */
export async function rotateServiceAccount(
  store: ManagementStore,
  auth: Authenticator,
  projectId: string,
  name: string,
  expiresAt: Date,
  now: Date = new Date(),
  opts: { maxDays?: number } = {},
): Promise<CreatedServiceAccount> {
  checkExpiry(expiresAt, now, opts.maxDays);
  const secret = newTokenSecret();
  const account = await store.rotateServiceAccount(projectId, name, {
    secretHash: hashSecret(secret),
    expiresAt: expiresAt.toISOString(),
  });
  if (!account) throw new ApiError(ErrorCode.NotFound, `service account ${name} not found`);
  auth.forget(projectId, name);
  return { account, token: formatToken(projectId, name, secret) };
}

export interface Principal {
  projectId: string;
  serviceAccount: string;
}

export interface Authenticator {
  /** The principal of a valid token; ApiError 401 otherwise. */
  authenticate(token: string): Promise<Principal>;
  /** Drops cached lookups of an account (called on revocation in this process). */
  forget(projectId: string, name: string): void;
}

export interface AuthenticatorSettings {
  /** How long a successful lookup is trusted; bounds how long a revocation made elsewhere can lag. */
  cacheMs: number;
  /** Minimum time between last-used writes for one account. */
  touchIntervalMs: number;
}

export function createAuthenticator(deps: {
  store: ManagementStore;
  settings: AuthenticatorSettings;
  log: Logger;
  now: () => number;
}): Authenticator {
  const { store, settings, log, now } = deps;
  /** Keyed by project/name/hash-of-secret, so a cache hit proves the same secret was verified. */
  const cache = new Map<string, { expiresAt: number; checkedAt: number }>();
  const lastTouch = new Map<string, number>();
  const unauthenticated = (why: string) => new ApiError(ErrorCode.Unauthenticated, why);

  function touch(projectId: string, name: string, t: number): void {
    const key = `${projectId}/${name}`;
    if (t - (lastTouch.get(key) ?? 0) < settings.touchIntervalMs) return;
    lastTouch.set(key, t);
    store.touchServiceAccount(projectId, name, new Date(t)).catch((err: unknown) => {
      log.warn({ err, projectId, serviceAccount: name }, 'could not record service-account use');
    });
  }

  return {
    async authenticate(token) {
      const parsed = parseToken(token);
      if (!parsed) throw unauthenticated('malformed service-account token');
      const { projectId, name, secret } = parsed;
      const key = `${projectId}/${name}/${hashSecret(secret)}`;
      const t = now();
      const hit = cache.get(key);
      if (hit && t - hit.checkedAt < settings.cacheMs) {
        if (t >= hit.expiresAt) {
          cache.delete(key);
          throw unauthenticated('service-account token has expired');
        }
        touch(projectId, name, t);
        return { projectId, serviceAccount: name };
      }
      cache.delete(key);
      const account = await store.getServiceAccount(projectId, name);
      if (!account || !secretMatches(secret, account.secretHash))
        throw unauthenticated('unknown or revoked service-account token');
      const expiresAt = Date.parse(account.expiresAt);
      if (!(t < expiresAt)) throw unauthenticated('service-account token has expired');
      cache.set(key, { expiresAt, checkedAt: t });
      if (cache.size > 10_000) cache.delete(cache.keys().next().value as string);
      touch(projectId, name, t);
      return { projectId, serviceAccount: name };
    },
    forget(projectId, name) {
      const prefix = `${projectId}/${name}/`;
      for (const k of cache.keys()) if (k.startsWith(prefix)) cache.delete(k);
    },
  };
}
