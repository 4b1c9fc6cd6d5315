/**
 * Service-account tokens: `ahsa_<project_id>_<name>_<secret>`. Project ids and names never contain
 * `_`, and the secret is 64 lowercase hex chars (32 random bytes). Only SHA-256(secret) is stored.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export const TOKEN_PREFIX = 'ahsa';
const SECRET = /^[0-9a-f]{64}$/;

export interface ParsedToken {
  projectId: string;
  name: string;
  secret: string;
}

export function newTokenSecret(): string {
  return randomBytes(32).toString('hex');
}

export function formatToken(projectId: string, name: string, secret: string): string {
  return `${TOKEN_PREFIX}_${projectId}_${name}_${secret}`;
}

/** undefined for anything not shaped like one of our tokens. */
export function parseToken(token: string): ParsedToken | undefined {
  const parts = token.split('_');
  if (parts.length !== 4 || parts[0] !== TOKEN_PREFIX) return undefined;
  const [, projectId, name, secret] = parts;
  if (!projectId || !name || !secret || !SECRET.test(secret)) return undefined;
  return { projectId, name, secret };
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Constant-time comparison of a presented secret with a stored hash. */
export function secretMatches(secret: string, storedHash: string): boolean {
  const a = Buffer.from(hashSecret(secret), 'hex');
  const b = Buffer.from(storedHash, 'hex');
  return a.length === b.length && a.length > 0 && timingSafeEqual(a, b);
}
