/**
 * The management API over HTTP, run against each store: authentication and isolation, the domain
 * lifecycle with unassign, service accounts, run tokens, runs, and bad input on every route.
 */
import { describe, expect, it } from 'vitest';
import { createServiceAccount } from '../../../src/management/service-accounts.ts';
import type { ManagementStore } from '../../../src/management/store/types.ts';
import type { RunRecord, WebhookDeliveryRecord } from '../../../src/shared/contracts/messaging.ts';
import { createRunTokenVerifier } from '../../../src/shared/run-tokens.ts';
import { type CallResult, call, type RunningApi } from './server.ts';

export interface ApiEnv {
  api: RunningApi;
  store: ManagementStore;
  projectId: string;
  otherProjectId: string;
  appName: string;
  /** A valid token of projectId and one of otherProjectId. */
  token: string;
  otherToken: string;
  runs: RunRecord[];
  deliveries: WebhookDeliveryRecord[];
  /** spec.appName of the stored DomainAssignment (or the memory record). */
  rawAssignedApp(domainId: string): Promise<string | undefined>;
  authCacheSeconds: number;
}

const HOUR = 3_600_000;
const inAYear = () => new Date(Date.now() + 365 * 24 * HOUR).toISOString();

function expectError(r: CallResult, status: number, code?: string): void {
  expect(r.status, r.text).toBe(status);
  expect(r.headers.get('content-type')).toMatch(/application\/json/);
  const err = (r.body as { error?: { code?: unknown; message?: unknown } }).error;
  expect(typeof err?.code).toBe('string');
  expect(typeof err?.message).toBe('string');
  expect(String(err?.message ?? '').length).toBeGreaterThan(0);
  if (code) expect(err?.code).toBe(code);
}

/** What a bad request must leave untouched. */
async function snapshot(env: ApiEnv) {
  const [domains, accounts, keys, runs] = await Promise.all([
    env.store.listDomains(env.projectId),
    env.store.listServiceAccounts(env.projectId),
    env.store.getRunTokenKeys(),
    Promise.resolve(JSON.stringify(env.runs)),
  ]);
  return {
    domains,
    accounts: accounts.map(({ lastUsedAt: _l, ...a }) => a),
    kids: keys.keys.map((k) => k.kid),
    runs,
  };
}

export function apiSuite(name: string, getEnv: () => ApiEnv): void {
  describe(`management API over HTTP: ${name}`, () => {
    const p = () => `/v2/projects/${getEnv().projectId}`;

    describe('authentication and isolation', () => {
      it('refuses a request without a token with 401 and WWW-Authenticate', async () => {
        const env = getEnv();
        const r = await call(env.api.url, 'GET', `${p()}/domains`);
        expectError(r, 401, 'unauthenticated');
        expect(r.headers.get('www-authenticate')).toMatch(/^Bearer/);
        expectError(
          await call(env.api.url, 'GET', `${p()}/domains`, { headers: { authorization: 'Basic abc' } }),
          401,
        );
      });

      it('refuses malformed and wrong-secret tokens with 401', async () => {
        const env = getEnv();
        for (const token of [
          'nonsense',
          'ahsa_x_y_z',
          `${env.token.slice(0, -1)}0`,
          `${env.token.slice(0, -2)}`,
        ]) {
          if (token === env.token) continue;
          expectError(await call(env.api.url, 'GET', `${p()}/domains`, { token }), 401, 'unauthenticated');
        }
      });

      it('refuses an expired token with 401', async () => {
        const env = getEnv();
        const { token } = await createServiceAccount(
          env.store,
          env.projectId,
          'short-lived',
          new Date(Date.now() + HOUR),
        );
        expect((await call(env.api.url, 'GET', `${p()}/domains`, { token })).status).toBe(200);
        env.api.advance(HOUR + 1000);
        try {
          expectError(await call(env.api.url, 'GET', `${p()}/domains`, { token }), 401, 'unauthenticated');
          // The long-lived token still works at the same moment.
          expect((await call(env.api.url, 'GET', `${p()}/domains`, { token: env.token })).status).toBe(200);
        } finally {
          env.api.advance(-(HOUR + 1000));
          await env.store.revokeServiceAccount(env.projectId, 'short-lived');
        }
      });

      it('refuses a revoked token with 401 at once (revoked through the API)', async () => {
        const env = getEnv();
        const created = await call(env.api.url, 'POST', `${p()}/service-accounts`, {
          token: env.token,
          body: { name: 'revoke-me', expires_at: inAYear() },
        });
        expect(created.status, created.text).toBe(201);
        const token = (created.body as { token: string }).token;
        expect((await call(env.api.url, 'GET', `${p()}/domains`, { token })).status).toBe(200);
        const revoked = await call(env.api.url, 'DELETE', `${p()}/service-accounts/revoke-me`, {
          token: env.token,
        });
        expect(revoked.status, revoked.text).toBe(200);
        expectError(await call(env.api.url, 'GET', `${p()}/domains`, { token }), 401, 'unauthenticated');
        expectError(
          await call(env.api.url, 'DELETE', `${p()}/service-accounts/revoke-me`, { token: env.token }),
          404,
        );
      });

      it('refuses a token revoked elsewhere (another replica) within the cache bound', async () => {
        const env = getEnv();
        const { token } = await createServiceAccount(
          env.store,
          env.projectId,
          'revoked-elsewhere',
          new Date(Date.now() + HOUR),
        );
        expect((await call(env.api.url, 'GET', `${p()}/domains`, { token })).status).toBe(200);
        await env.store.revokeServiceAccount(env.projectId, 'revoked-elsewhere');
        env.api.advance(env.authCacheSeconds * 1000 + 1);
        try {
          expectError(await call(env.api.url, 'GET', `${p()}/domains`, { token }), 401, 'unauthenticated');
        } finally {
          env.api.advance(-(env.authCacheSeconds * 1000 + 1));
        }
      });

      it("answers 404 for another project's paths, and for unknown projects, whatever the route", async () => {
        const env = getEnv();
        const other = `/v2/projects/${env.otherProjectId}`;
        const routes: Array<[string, string, unknown?]> = [
          ['GET', '/domains'],
          ['POST', '/domains', { hostname: 'steal.example.test' }],
          ['GET', '/domains/x'],
          ['DELETE', '/domains/x'],
          ['PUT', '/domains/x/assign', { app_name: env.appName }],
          ['DELETE', '/domains/x/assign'],
          ['GET', '/service-accounts'],
          ['POST', '/service-accounts', { name: 'intruder', expires_at: inAYear() }],
          ['DELETE', '/service-accounts/x'],
          ['POST', '/service-accounts/x/rotate', { expires_at: inAYear() }],
          ['POST', '/run-tokens', { expires_at: inAYear() }],
          ['GET', `/apps/${env.appName}/runs`],
          ['GET', `/apps/${env.appName}/runs/r1`],
          ['DELETE', `/apps/${env.appName}/runs/r1`],
        ];
        const before = await env.store.listServiceAccounts(env.otherProjectId);
        for (const [method, path, body] of routes) {
          const viaOther = await call(env.api.url, method, `${other}${path}`, { token: env.token, body });
          expectError(viaOther, 404, 'not_found');
          const unknown = await call(env.api.url, method, `/v2/projects/no-such-project${path}`, {
            token: env.token,
            body,
          });
          expectError(unknown, 404, 'not_found');
          // Same message shape for both: nothing tells an existing project from a missing one.
          expect((viaOther.body as { error: { message: string } }).error.message).toBe(
            `project ${env.otherProjectId} not found`,
          );
        }
        expect(await env.store.listServiceAccounts(env.otherProjectId)).toEqual(before);
        expect(await env.store.listDomains(env.otherProjectId)).toEqual([]);
        // And the other project's own token works there.
        expect((await call(env.api.url, 'GET', `${other}/domains`, { token: env.otherToken })).status).toBe(
          200,
        );
      });
    });

    describe('custom domains', () => {
      it('creates, assigns and unassigns a domain; the stored assignment loses its app; a second unassign is 200', async () => {
        const env = getEnv();
        const t = { token: env.token };
        const created = await call(env.api.url, 'POST', `${p()}/domains`, {
          ...t,
          body: { hostname: 'Shop.Example.test' },
        });
        expect(created.status, created.text).toBe(201);
        expect(created.body).toMatchObject({
          domain_id: 'shop-example-test',
          hostname: 'shop.example.test',
          assigned: false,
        });

        const assigned = await call(env.api.url, 'PUT', `${p()}/domains/shop-example-test/assign`, {
          ...t,
          body: { app_name: env.appName },
        });
        expect(assigned.status, assigned.text).toBe(200);
        expect(assigned.body).toMatchObject({ assigned: true, app_name: env.appName });
        expect(await env.rawAssignedApp('shop-example-test')).toBe(env.appName);

        const got = await call(env.api.url, 'GET', `${p()}/domains/shop-example-test`, t);
        expect(got.body).toMatchObject({ app_name: env.appName });

        const unassigned = await call(env.api.url, 'DELETE', `${p()}/domains/shop-example-test/assign`, t);
        expect(unassigned.status, unassigned.text).toBe(200);
        expect(unassigned.body).toMatchObject({
          domain_id: 'shop-example-test',
          hostname: 'shop.example.test',
          assigned: false,
        });
        expect(unassigned.body).not.toHaveProperty('app_name');
        expect(await env.rawAssignedApp('shop-example-test')).toBeUndefined();

        const again = await call(env.api.url, 'DELETE', `${p()}/domains/shop-example-test/assign`, t);
        expect(again.status).toBe(200);
        expect(again.body).toEqual(unassigned.body);

        const list = await call(env.api.url, 'GET', `${p()}/domains`, t);
        expect((list.body as { domains: unknown[] }).domains).toContainEqual(unassigned.body);

        const deleted = await call(env.api.url, 'DELETE', `${p()}/domains/shop-example-test`, t);
        expect(deleted.status).toBe(200);
        expectError(await call(env.api.url, 'GET', `${p()}/domains/shop-example-test`, t), 404, 'not_found');
        expectError(
          await call(env.api.url, 'DELETE', `${p()}/domains/shop-example-test/assign`, t),
          404,
          'not_found',
        );
      });
    });

    describe('service accounts and run tokens', () => {
      it('shows a token once, lists accounts without it, and records use', async () => {
        const env = getEnv();
        const created = await call(env.api.url, 'POST', `${p()}/service-accounts`, {
          token: env.token,
          body: { name: 'deploy-bot', expires_at: inAYear() },
        });
        expect(created.status, created.text).toBe(201);
        const { token, expires_at } = created.body as { token: string; expires_at: string };
        expect(Date.parse(expires_at)).toBeGreaterThan(Date.now() + 364 * 24 * HOUR);
        expect(token).toMatch(new RegExp(`^ahsa_${env.projectId}_deploy-bot_[0-9a-f]{64}$`));
        expect(created.headers.get('cache-control')).toBe('no-store');

        const list = await call(env.api.url, 'GET', `${p()}/service-accounts`, { token });
        expect(list.status).toBe(200);
        expect(list.text).not.toContain(token.slice(-64));
        const names = (list.body as { service_accounts: Array<{ name: string }> }).service_accounts.map(
          (a) => a.name,
        );
        expect(names).toContain('deploy-bot');
        // Last use is written asynchronously; wait for it (bounded).
        let lastUsed: string | undefined;
        for (let i = 0; i < 50 && !lastUsed; i++) {
          lastUsed = (await env.store.getServiceAccount(env.projectId, 'deploy-bot'))?.lastUsedAt;
          if (!lastUsed) await new Promise((r) => setTimeout(r, 100));
        }
        expect(lastUsed).toBeDefined();
        expectError(
          await call(env.api.url, 'POST', `${p()}/service-accounts`, {
            token: env.token,
            body: { name: 'deploy-bot', expires_at: inAYear() },
          }),
          409,
          'conflict',
        );
        await env.store.revokeServiceAccount(env.projectId, 'deploy-bot');
      });

      it('rotates a service account: the new token is shown once and works, the old one is refused at once', async () => {
        const env = getEnv();
        const created = await call(env.api.url, 'POST', `${p()}/service-accounts`, {
          token: env.token,
          body: { name: 'rotate-me', expires_at: inAYear() },
        });
        const old = (created.body as { token: string }).token;
        expect((await call(env.api.url, 'GET', `${p()}/domains`, { token: old })).status).toBe(200);
        const expires = new Date(Date.now() + 30 * 24 * HOUR).toISOString().slice(0, 10);
        const rotated = await call(env.api.url, 'POST', `${p()}/service-accounts/rotate-me/rotate`, {
          token: env.token,
          body: { expires_at: expires },
        });
        expect(rotated.status, rotated.text).toBe(200);
        expect(rotated.headers.get('cache-control')).toBe('no-store');
        const body = rotated.body as { name: string; token: string; expires_at: string; created_at: string };
        expect(body.name).toBe('rotate-me');
        expect(body.expires_at).toBe(`${expires}T00:00:00.000Z`);
        expect(body.created_at).toBe((created.body as { created_at: string }).created_at);
        expect(body.token).toMatch(new RegExp(`^ahsa_${env.projectId}_rotate-me_[0-9a-f]{64}$`));
        expect(body.token).not.toBe(old);
        expectError(await call(env.api.url, 'GET', `${p()}/domains`, { token: old }), 401);
        expect((await call(env.api.url, 'GET', `${p()}/domains`, { token: body.token })).status).toBe(200);
        // A rotation the rules refuse changes nothing: the current token keeps working.
        const refused = await call(env.api.url, 'POST', `${p()}/service-accounts/rotate-me/rotate`, {
          token: env.token,
          body: { expires_at: '2001-01-01' },
        });
        expectError(refused, 422);
        expect((await call(env.api.url, 'GET', `${p()}/domains`, { token: body.token })).status).toBe(200);
        await env.store.revokeServiceAccount(env.projectId, 'rotate-me');
      });

      it('caps the lifetime of a service account (APPHOST_MANAGEMENT_MAX_SERVICE_ACCOUNT_DAYS, 366 by default)', async () => {
        const env = getEnv();
        for (const expires_at of ['9999-12-31', new Date(Date.now() + 367 * 24 * HOUR).toISOString()]) {
          const r = await call(env.api.url, 'POST', `${p()}/service-accounts`, {
            token: env.token,
            body: { name: 'forever', expires_at },
          });
          expectError(r, 422);
          expect(r.text).toContain('at most 366 days ahead');
        }
        expect(await env.store.getServiceAccount(env.projectId, 'forever')).toBeUndefined();
      });

      it('issues run tokens the gateway verifier accepts, before and after a key rotation', async () => {
        const env = getEnv();
        const expiresAt = new Date(Date.now() + 2 * HOUR);
        const r = await call(env.api.url, 'POST', `${p()}/run-tokens`, {
          token: env.token,
          body: { expires_at: expiresAt.toISOString() },
        });
        expect(r.status, r.text).toBe(201);
        const body = r.body as { token: string; expires_at: string; project_id: string };
        expect(body.project_id).toBe(env.projectId);
        expect(Math.abs(Date.parse(body.expires_at) - expiresAt.getTime())).toBeLessThan(1000);
        const rotated = await env.store.rotateRunTokenKeys();
        const verify = createRunTokenVerifier(() => rotated);
        const claims = await verify(body.token);
        expect(claims.projectId).toBe(env.projectId);
        const after = await call(env.api.url, 'POST', `${p()}/run-tokens`, {
          token: env.token,
          body: { expires_at: expiresAt.toISOString() },
        });
        expect((await verify((after.body as { token: string }).token)).projectId).toBe(env.projectId);
      });
    });

    describe('runs', () => {
      it('shows a run with its webhook delivery attempts, lists by state, and cancels', async () => {
        const env = getEnv();
        const t = { token: env.token };
        const base = `${p()}/apps/${env.appName}/runs`;
        const got = await call(env.api.url, 'GET', `${base}/run-failed`, t);
        expect(got.status, got.text).toBe(200);
        expect(got.body).toMatchObject({
          run_id: 'run-failed',
          state: 'failure',
          error: { code: 'function_error' },
          webhook_delivery: {
            state: 'failed',
            attempts: [
              { attempt: 1, outcome: 'network_error' },
              { attempt: 2, outcome: 'http_retryable', status: 404 },
              { attempt: 3 },
            ],
          },
        });

        const failures = await call(env.api.url, 'GET', `${base}?state=failure`, t);
        expect((failures.body as { runs: Array<{ run_id: string }> }).runs.map((r) => r.run_id)).toEqual([
          'run-failed',
        ]);
        const limited = await call(env.api.url, 'GET', `${base}?limit=1`, t);
        expect((limited.body as { runs: unknown[] }).runs).toHaveLength(1);

        const cancelled = await call(env.api.url, 'DELETE', `${base}/run-running`, t);
        expect(cancelled.status, cancelled.text).toBe(202);
        expect(cancelled.body).toMatchObject({ run_id: 'run-running', cancel_requested: true });
        expectError(await call(env.api.url, 'DELETE', `${base}/run-failed`, t), 409, 'conflict');
        expectError(await call(env.api.url, 'GET', `${base}/no-such-run`, t), 404, 'not_found');
        expectError(await call(env.api.url, 'DELETE', `${base}/no-such-run`, t), 404, 'not_found');
      });
    });

    describe('bad input on every route: a clear 4xx JSON error, nothing changed', () => {
      it('answers each bad request with the right 4xx and leaves the store as it was', async () => {
        const env = getEnv();
        const t = { token: env.token };
        const seeded = await call(env.api.url, 'POST', `${p()}/domains`, {
          ...t,
          body: { domain_id: 'keep', hostname: 'keep.example.test' },
        });
        expect(seeded.status, seeded.text).toBe(201);
        const big = JSON.stringify({ hostname: 'x'.repeat(70 * 1024) });
        const cases: Array<{
          what: string;
          method: string;
          path: string;
          body?: unknown;
          raw?: string;
          headers?: Record<string, string>;
          status: number;
        }> = [
          { what: 'create domain: no body', method: 'POST', path: '/domains', status: 400 },
          {
            what: 'create domain: missing hostname',
            method: 'POST',
            path: '/domains',
            body: {},
            status: 400,
          },
          {
            what: 'create domain: hostname wrong type',
            method: 'POST',
            path: '/domains',
            body: { hostname: 42 },
            status: 400,
          },
          {
            what: 'create domain: not a hostname',
            method: 'POST',
            path: '/domains',
            body: { hostname: 'no spaces allowed' },
            status: 400,
          },
          {
            what: 'create domain: bad id',
            method: 'POST',
            path: '/domains',
            body: { domain_id: 'Bad_Id', hostname: 'a.example.test' },
            status: 400,
          },
          {
            what: 'create domain: unknown field',
            method: 'POST',
            path: '/domains',
            body: { hostname: 'a.example.test', extra: 1 },
            status: 400,
          },
          {
            what: 'create domain: body is an array',
            method: 'POST',
            path: '/domains',
            body: ['a.example.test'],
            status: 400,
          },
          {
            what: 'create domain: invalid JSON',
            method: 'POST',
            path: '/domains',
            raw: '{"hostname":',
            headers: { 'content-type': 'application/json' },
            status: 400,
          },
          {
            what: 'create domain: not JSON',
            method: 'POST',
            path: '/domains',
            raw: 'hostname=a.example.test',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            status: 415,
          },
          {
            what: 'create domain: oversized',
            method: 'POST',
            path: '/domains',
            raw: big,
            headers: { 'content-type': 'application/json' },
            status: 413,
          },
          {
            what: 'create domain: duplicate hostname',
            method: 'POST',
            path: '/domains',
            body: { domain_id: 'other', hostname: 'keep.example.test' },
            status: 409,
          },
          {
            what: 'create domain: duplicate id',
            method: 'POST',
            path: '/domains',
            body: { domain_id: 'keep', hostname: 'other.example.test' },
            status: 409,
          },
          { what: 'get domain: unknown id', method: 'GET', path: '/domains/nope', status: 404 },
          { what: 'get domain: invalid id', method: 'GET', path: '/domains/NOT_VALID', status: 400 },
          { what: 'delete domain: unknown id', method: 'DELETE', path: '/domains/nope', status: 404 },
          {
            what: 'delete domain: oversized body',
            method: 'DELETE',
            path: '/domains/keep',
            raw: big,
            headers: { 'content-type': 'application/json' },
            status: 413,
          },
          {
            what: 'assign: missing app_name',
            method: 'PUT',
            path: '/domains/keep/assign',
            body: {},
            status: 400,
          },
          {
            what: 'assign: app_name wrong type',
            method: 'PUT',
            path: '/domains/keep/assign',
            body: { app_name: ['x'] },
            status: 400,
          },
          {
            what: 'assign: unknown app',
            method: 'PUT',
            path: '/domains/keep/assign',
            body: { app_name: 'no-such-app' },
            status: 422,
          },
          {
            what: 'assign: unknown domain',
            method: 'PUT',
            path: '/domains/nope/assign',
            body: { app_name: env.appName },
            status: 404,
          },
          {
            what: 'assign: oversized',
            method: 'PUT',
            path: '/domains/keep/assign',
            raw: big,
            headers: { 'content-type': 'application/json' },
            status: 413,
          },
          { what: 'unassign: unknown domain', method: 'DELETE', path: '/domains/nope/assign', status: 404 },
          {
            what: 'unassign: invalid id',
            method: 'DELETE',
            path: '/domains/..%2F..%2Fx/assign',
            status: 400,
          },
          {
            what: 'create account: missing expiry',
            method: 'POST',
            path: '/service-accounts',
            body: { name: 'x' },
            status: 400,
          },
          {
            what: 'create account: missing name',
            method: 'POST',
            path: '/service-accounts',
            body: { expires_at: '2099-01-01' },
            status: 400,
          },
          {
            what: 'create account: bad date',
            method: 'POST',
            path: '/service-accounts',
            body: { name: 'x', expires_at: 'tomorrow' },
            status: 400,
          },
          {
            what: 'create account: expiry wrong type',
            method: 'POST',
            path: '/service-accounts',
            body: { name: 'x', expires_at: 4102444800 },
            status: 400,
          },
          {
            what: 'create account: past expiry',
            method: 'POST',
            path: '/service-accounts',
            body: { name: 'x', expires_at: '2001-01-01' },
            status: 422,
          },
          {
            what: 'create account: bad name',
            method: 'POST',
            path: '/service-accounts',
            body: { name: 'has_underscore', expires_at: '2099-01-01' },
            status: 400,
          },
          {
            what: 'create account: oversized',
            method: 'POST',
            path: '/service-accounts',
            raw: big,
            headers: { 'content-type': 'application/json' },
            status: 413,
          },
          {
            what: 'revoke: unknown account',
            method: 'DELETE',
            path: '/service-accounts/nobody',
            status: 404,
          },
          { what: 'revoke: invalid name', method: 'DELETE', path: '/service-accounts/No_Body', status: 400 },
          {
            what: 'rotate: unknown account',
            method: 'POST',
            path: '/service-accounts/nobody/rotate',
            body: { expires_at: inAYear() },
            status: 404,
          },
          {
            what: 'rotate: missing expiry',
            method: 'POST',
            path: '/service-accounts/nobody/rotate',
            body: {},
            status: 400,
          },
          {
            what: 'rotate: unknown field',
            method: 'POST',
            path: '/service-accounts/nobody/rotate',
            body: { expires_at: inAYear(), name: 'x' },
            status: 400,
          },
          {
            what: 'rotate: past expiry',
            method: 'POST',
            path: '/service-accounts/admin/rotate',
            body: { expires_at: '2001-01-01' },
            status: 422,
          },
          { what: 'run token: missing expiry', method: 'POST', path: '/run-tokens', body: {}, status: 400 },
          {
            what: 'run token: wrong type',
            method: 'POST',
            path: '/run-tokens',
            body: { expires_at: true },
            status: 400,
          },
          {
            what: 'run token: past',
            method: 'POST',
            path: '/run-tokens',
            body: { expires_at: '2001-01-01T00:00:00Z' },
            status: 422,
          },
          {
            what: 'run token: too far',
            method: 'POST',
            path: '/run-tokens',
            body: { expires_at: '2999-01-01' },
            status: 422,
          },
          {
            what: 'run token: oversized',
            method: 'POST',
            path: '/run-tokens',
            raw: big,
            headers: { 'content-type': 'application/json' },
            status: 413,
          },
          {
            what: 'runs: bad state',
            method: 'GET',
            path: `/apps/${env.appName}/runs?state=exploded`,
            status: 400,
          },
          { what: 'runs: bad limit', method: 'GET', path: `/apps/${env.appName}/runs?limit=0`, status: 400 },
          {
            what: 'runs: limit not a number',
            method: 'GET',
            path: `/apps/${env.appName}/runs?limit=ten`,
            status: 400,
          },
          {
            what: 'runs: unknown query',
            method: 'GET',
            path: `/apps/${env.appName}/runs?colour=red`,
            status: 400,
          },
          { what: 'runs: invalid app', method: 'GET', path: '/apps/Bad_App/runs', status: 400 },
          { what: 'run: unknown', method: 'GET', path: `/apps/${env.appName}/runs/nope`, status: 404 },
          { what: 'run: invalid id', method: 'GET', path: `/apps/${env.appName}/runs/bad%20id`, status: 400 },
          { what: 'cancel: unknown', method: 'DELETE', path: `/apps/${env.appName}/runs/nope`, status: 404 },
          {
            what: 'cancel: finished',
            method: 'DELETE',
            path: `/apps/${env.appName}/runs/run-failed`,
            status: 409,
          },
          { what: 'wrong method', method: 'PATCH', path: '/domains/keep', body: {}, status: 405 },
          { what: 'unknown route', method: 'GET', path: '/nothing-here', status: 404 },
        ];
        const before = await snapshot(env);
        for (const c of cases) {
          const r = await call(env.api.url, c.method, `${p()}${c.path}`, {
            ...t,
            ...(c.body !== undefined ? { body: c.body } : {}),
            ...(c.raw !== undefined ? { rawBody: c.raw } : {}),
            ...(c.headers ? { headers: c.headers } : {}),
          });
          expect(r.status, `${c.what}: ${r.text}`).toBe(c.status);
          expectError(r, c.status);
        }
        expect(await snapshot(env)).toEqual(before);
        await env.store.deleteDomain(env.projectId, 'keep');
      });

      it('stops reading a chunked body (no Content-Length) at the limit with 413', async () => {
        const env = getEnv();
        const before = await snapshot(env);
        const chunk = new TextEncoder().encode(`{"hostname":"${'x'.repeat(16 * 1024)}`);
        let sent = 0;
        const body = new ReadableStream<Uint8Array>({
          pull(c) {
            if (sent++ < 64) c.enqueue(chunk);
            else c.close();
          },
        });
        const res = await fetch(`${env.api.url}${p()}/domains`, {
          method: 'POST',
          body,
          duplex: 'half',
          headers: { authorization: `Bearer ${env.token}`, 'content-type': 'application/json' },
        } as RequestInit);
        expect(res.status).toBe(413);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
        expect(await snapshot(env)).toEqual(before);
      });
    });
  });
}

/** Run records the runs tests expect (a failed run with three delivery attempts, a running one). */
export function seedRuns(
  projectId: string,
  appName: string,
): { runs: RunRecord[]; deliveries: WebhookDeliveryRecord[] } {
  const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
  return {
    runs: [
      {
        runId: 'run-failed',
        projectId,
        appName,
        path: 'predict',
        state: 'failure',
        createdAt: at(1),
        startedAt: at(2),
        finishedAt: at(3),
        executions: 1,
        responseStatus: 500,
        error: { code: 'function_error', message: 'ZeroDivisionError' },
        webhookHost: 'hooks.example.test',
      },
      {
        runId: 'run-running',
        projectId,
        appName,
        path: 'predict',
        state: 'running',
        createdAt: at(4),
        startedAt: at(5),
        executions: 1,
      },
      {
        runId: 'run-queued',
        projectId,
        appName,
        path: 'predict',
        state: 'queued',
        createdAt: at(6),
        executions: 0,
      },
    ],
    deliveries: [
      {
        requestId: 'run-failed',
        projectId,
        appName,
        endpointHost: 'hooks.example.test',
        state: 'failed',
        attempts: [
          { attempt: 1, at: at(3), outcome: 'network_error', error: 'ECONNREFUSED', durationMs: 3 },
          { attempt: 2, at: at(5), outcome: 'http_retryable', status: 404, durationMs: 12 },
          { attempt: 3, at: at(9), outcome: 'http_retryable', status: 404, durationMs: 10 },
        ],
        updatedAt: at(9),
      },
    ],
  };
}
