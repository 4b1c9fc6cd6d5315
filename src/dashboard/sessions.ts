/**
 * Dashboard sign-in sessions, shared by every management API replica through a NATS KV bucket.
 * The cookie carries `<project>.<account>.<secret>`; the bucket holds only SHA-256(secret) in its key,
 * so reading the bucket does not let anyone use a session. A session never holds the token: only the
 * hash of its secret, which each request compares with the account's current one (so a revoked,
 * rotated or expired token ends its sessions at once, on every replica).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { DNS_LABEL } from '../apis/names.ts';
import {
  DASHBOARD_SESSIONS_BUCKET,
  dashboardSessionsBucket,
  ensureBucket,
} from '../shared/nats/jetstream.ts';
import { type Replicas, SINGLE_REPLICA } from '../shared/nats/replicas.ts';

export const SESSIONS_BUCKET = DASHBOARD_SESSIONS_BUCKET;

export interface Session {
  projectId: string;
  serviceAccount: string;
  /** Hash of the secret of the token used to sign in (the same hash the store keeps). */
  tokenHash: string;
  /** Per-session CSRF token, put in every form. */
  csrf: string;
  createdAt: string;
  expiresAt: string;
}

interface StoredSession extends Session {
  v: 1;
}

export interface SessionStore {
  /** Stores a new session; returns the cookie value that names it. */
  create(s: Omit<Session, 'csrf'>): Promise<{ cookie: string; session: Session }>;
  /** undefined for an unknown, ended or malformed cookie value. */
  get(cookie: string): Promise<Session | undefined>;
  end(cookie: string): Promise<void>;
  /** Ends every session of one service account (revocation, rotation). */
  endAll(projectId: string, serviceAccount: string): Promise<void>;
}

const SECRET = /^[A-Za-z0-9_-]{43}$/;

function parseCookie(cookie: string): { projectId: string; serviceAccount: string; key: string } | undefined {
  const [projectId, serviceAccount, secret, extra] = cookie.split('.');
  if (extra !== undefined || !projectId || !serviceAccount || !secret) return undefined;
  if (!DNS_LABEL.test(projectId) || !DNS_LABEL.test(serviceAccount) || !SECRET.test(secret)) return undefined;
  const hash = createHash('sha256').update(secret).digest('hex');
  return { projectId, serviceAccount, key: `${projectId}.${serviceAccount}.${hash}` };
}

/** Opens (creating if needed) the sessions bucket; entries expire `maxAgeMs` after they were written. */
export async function openSessionsBucket(
  jsm: JetStreamManager,
  maxAgeMs: number,
  replicas: Replicas = SINGLE_REPLICA,
): Promise<KV> {
  return ensureBucket(jsm, dashboardSessionsBucket(maxAgeMs), replicas);
}

export function createKvSessionStore(kv: KV): SessionStore {
  return {
    async create(s) {
      const secret = randomBytes(32).toString('base64url');
      const cookie = `${s.projectId}.${s.serviceAccount}.${secret}`;
      const parsed = parseCookie(cookie);
      if (!parsed) throw new Error('session names must be DNS labels');
      const session: Session = { ...s, csrf: randomBytes(32).toString('base64url') };
      await kv.create(parsed.key, JSON.stringify({ v: 1, ...session } satisfies StoredSession));
      return { cookie, session };
    },
    async get(cookie) {
      const parsed = parseCookie(cookie);
      if (!parsed) return undefined;
      const e = await kv.get(parsed.key);
      if (e?.operation !== 'PUT') return undefined;
      const { v, ...session } = e.json<StoredSession>();
      if (
        v !== 1 ||
        session.projectId !== parsed.projectId ||
        session.serviceAccount !== parsed.serviceAccount
      )
        return undefined;
      return session;
    },
    async end(cookie) {
      const parsed = parseCookie(cookie);
      if (parsed) await kv.purge(parsed.key);
    },
    async endAll(projectId, serviceAccount) {
      const keys: string[] = [];
      for await (const k of await kv.keys(`${projectId}.${serviceAccount}.*`)) keys.push(k);
      await Promise.all(keys.map((k) => kv.purge(k)));
    },
  };
}
