/**
 * The dashboard at the HTTP level: sessions (cookie attributes, expiry, revocation), CSRF on every
 * form, form validation with a message next to the field, project isolation, security headers, and
 * no token in a log line. Sessions live in a real NATS KV bucket.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createServiceAccount } from '../../../src/management/service-accounts.ts';
import { createMemoryStore, type MemoryStore } from '../../../src/management/store/memory.ts';
import type { RunRecord } from '../../../src/shared/contracts/messaging.ts';
import { memoryDeliveries, memoryRuns } from '../management/fixtures.ts';
import { Browser, type DashboardServer, startDashboard } from './server.ts';

const FAR = new Date(Date.now() + 300 * 86_400_000);
/** A valid expiry date for the forms (within the 366-day cap). */
const SOON = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);

describe('dashboard over HTTP', () => {
  let store: MemoryStore;
  let server: DashboardServer;
  let token: string;
  let otherToken: string;
  const runs: RunRecord[] = [
    {
      runId: 'run-queued-1',
      projectId: 'proj',
      appName: 'hello',
      path: 'run',
      state: 'queued',
      createdAt: new Date().toISOString(),
      executions: 0,
    },
  ];

  beforeAll(async () => {
    store = createMemoryStore({ projects: { proj: ['hello', 'slow'], other: ['hello', 'secret-app'] } });
    token = (await createServiceAccount(store, 'proj', 'admin', FAR)).token;
    otherToken = (await createServiceAccount(store, 'other', 'admin', FAR)).token;
    await createServiceAccount(store, 'other', 'ci', FAR);
    await store.createDomain('proj', { domainId: 'shop', hostname: 'shop.example.test' });
    await store.assignDomain('proj', 'shop', 'hello');
    await store.createDomain('other', { domainId: 'theirs', hostname: 'theirs.example.test' });
    await store.assignDomain('other', 'theirs', 'hello');
    server = await startDashboard({
      natsUrl: inject('natsUrl'),
      store,
      runs: memoryRuns(runs),
      deliveries: memoryDeliveries(),
    });
  });
  afterAll(async () => {
    await server?.close();
  });

  const signedIn = async (t = token) => {
    const b = new Browser(server.url);
    const r = await b.signIn(t);
    expect(r.status).toBe(303);
    expect(r.location).toBe('/dashboard/apps');
    return b;
  };

  it('redirects / to the dashboard and every page without a session to sign-in', async () => {
    const b = new Browser(server.url);
    const root = await b.get('/');
    expect(root.status).toBe(302);
    expect(root.location).toBe('/dashboard');
    for (const path of [
      '/dashboard',
      '/dashboard/apps',
      '/dashboard/apps/hello',
      '/dashboard/runs',
      '/dashboard/runs/hello/run-queued-1',
      '/dashboard/domains',
      '/dashboard/keys',
      '/dashboard/keys/admin/revoke',
    ]) {
      const r = await b.get(path);
      expect([path, r.status, r.location]).toEqual([path, 303, '/dashboard/sign-in']);
    }
    // An htmx refresh is told where to go instead of getting the sign-in page swapped into a table.
    const partial = await b.get('/dashboard/runs/table', { 'hx-request': 'true' });
    expect(partial.headers.get('hx-redirect')).toBe('/dashboard/sign-in');
    // A forged session cookie is no session either.
    b.cookies.set('apphost_session', `proj.admin.${'A'.repeat(43)}`);
    expect((await b.get('/dashboard/apps')).location).toBe('/dashboard/sign-in');
  });

  it('signs in with a token into an HttpOnly, SameSite=Strict cookie that expires with the token', async () => {
    const shortLived = (await createServiceAccount(store, 'proj', 'short', new Date(Date.now() + 3_600_000)))
      .token;
    const b = new Browser(server.url);
    const page = await b.get('/dashboard/sign-in');
    const res = await fetch(`${server.url}/dashboard/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
        'x-forwarded-proto': 'https',
      },
      body: new URLSearchParams({ _csrf: Browser.csrf(page.text), token: shortLived }).toString(),
    });
    expect(res.status).toBe(303);
    const cookie = res.headers.getSetCookie().find((c) => c.startsWith('apphost_session='));
    expect(cookie).toBeDefined();
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; SameSite=Strict/);
    expect(cookie).toMatch(/; Secure/);
    expect(cookie).toMatch(/; Path=\/dashboard/);
    const expires = Date.parse(/Expires=([^;]+)/.exec(cookie ?? '')?.[1] ?? '');
    expect(expires).toBeLessThanOrEqual(Date.now() + 3_600_000);
    // The cookie names the session; the token is in neither the cookie nor the redirect.
    expect(cookie).not.toContain(shortLived.split('_')[3]);
    // Over plain HTTP (no TLS, no proxy saying https) the cookie is not Secure, or the browser would drop it.
    const plain = await signedIn();
    expect(plain.cookies.get('apphost_session')).toBeTruthy();
  });

  it('refuses bad sign-in tokens with a message next to the field', async () => {
    const cases: Array<[string, number, RegExp]> = [
      ['', 422, /Paste a service-account token/],
      ['not-a-token', 422, /not a service-account token/],
      [`ahsa_proj_admin_${'0'.repeat(64)}`, 401, /unknown, revoked or expired/],
      [`ahsa_nope_admin_${'0'.repeat(64)}`, 401, /unknown, revoked or expired/],
    ];
    for (const [t, status, message] of cases) {
      const b = new Browser(server.url);
      const r = await b.signIn(t);
      expect([t, r.status]).toEqual([t, status]);
      expect(r.text).toMatch(/id="token-error" class="field-error">[^<]*/);
      expect(r.text).toMatch(message);
      expect(b.cookies.has('apphost_session')).toBe(false);
    }
  });

  it('refuses a sign-in without its CSRF cookie or field, and cross-site posts', async () => {
    const b = new Browser(server.url);
    const page = await b.get('/dashboard/sign-in');
    const csrf = Browser.csrf(page.text);
    expect((await b.post('/dashboard/sign-in', { token })).status).toBe(403);
    expect((await b.post('/dashboard/sign-in', { token, _csrf: `${csrf}x` })).status).toBe(403);
    const noCookie = new Browser(server.url);
    expect((await noCookie.post('/dashboard/sign-in', { token, _csrf: csrf })).status).toBe(403);
    const cross = await b.post(
      '/dashboard/sign-in',
      { token, _csrf: csrf },
      { 'sec-fetch-site': 'cross-site' },
    );
    expect(cross.status).toBe(403);
    expect(b.cookies.has('apphost_session')).toBe(false);
  });

  it('answers 403 to every form posted with a missing or forged CSRF token, changing nothing', async () => {
    const b = await signedIn();
    const posts: Array<[string, Record<string, string>]> = [
      ['/dashboard/sign-out', {}],
      ['/dashboard/keys', { name: 'forged', expires_at: '2090-01-01' }],
      ['/dashboard/keys/admin/revoke', {}],
      ['/dashboard/keys/admin/rotate', { expires_at: '2090-01-01' }],
      ['/dashboard/domains', { hostname: 'forged.example.test' }],
      ['/dashboard/domains/shop/assign', { app: 'slow' }],
      ['/dashboard/domains/shop/unassign', {}],
      ['/dashboard/runs/hello/run-queued-1/cancel', {}],
    ];
    for (const [path, form] of posts) {
      for (const csrf of [undefined, 'forged', `${'A'.repeat(43)}`]) {
        const r = await b.post(path, csrf === undefined ? form : { ...form, _csrf: csrf });
        expect([path, csrf, r.status]).toEqual([path, csrf, 403]);
        expect(r.text).toMatch(/security token/);
      }
    }
    expect(await store.getServiceAccount('proj', 'forged')).toBeUndefined();
    expect(await store.getServiceAccount('proj', 'admin')).toBeDefined();
    expect((await store.getDomain('proj', 'shop'))?.appName).toBe('hello');
    expect(await store.getDomain('proj', 'forged-example-test')).toBeUndefined();
    expect(runs[0]?.cancelRequested).toBeUndefined();
    expect((await b.get('/dashboard/apps')).status).toBe(200);
  });

  it.each([
    [{ name: '', expires_at: SOON }, 'name', /Give the key a name/],
    [{ name: 'Bad_Name', expires_at: SOON }, 'name', /DNS label/],
    [{ name: 'x'.repeat(53), expires_at: SOON }, 'name', /at most 52/],
    [{ name: 'ok', expires_at: '' }, 'expires_at', /Choose the date/],
    [{ name: 'ok', expires_at: 'next week' }, 'expires_at', /RFC 3339 date-time or a date/],
    [{ name: 'ok', expires_at: '2020-01-01' }, 'expires_at', /must be in the future/],
    [{ name: 'ok', expires_at: '2090-01-01' }, 'expires_at', /at most 366 days/],
    [{ name: 'admin', expires_at: SOON }, 'name', /already exists/],
  ])('refuses the key form %j with a message next to %s', async (form, field, message) => {
    const b = await signedIn();
    const page = await b.get('/dashboard/keys');
    const r = await b.post('/dashboard/keys', { ...form, _csrf: Browser.csrf(page.text) });
    expect([409, 422]).toContain(r.status);
    const m = new RegExp(`id="${field}-error" class="field-error">([^<]*)<`).exec(r.text);
    expect(m?.[1]).toMatch(message);
    expect(r.text).toContain(
      `aria-describedby="${field === 'name' ? 'name-help' : 'expires-help'} ${field}-error"`,
    );
    // What was typed is kept.
    if (form.name) expect(r.text).toContain(`value="${form.name}"`);
    expect(r.text).not.toContain('Copy the token now');
  });

  it.each([
    [{ hostname: '', domain_id: '' }, 'hostname', /Enter a hostname/],
    [{ hostname: 'not a host', domain_id: '' }, 'hostname', /fully qualified hostname/],
    [{ hostname: 'localhost', domain_id: '' }, 'hostname', /fully qualified hostname/],
    [{ hostname: 'ok.example.test', domain_id: 'Bad_Id' }, 'domain_id', /DNS label/],
    [{ hostname: 'theirs.example.test', domain_id: '' }, 'hostname', /already in use/],
    [{ hostname: 'new.example.test', domain_id: 'shop' }, 'domain_id', /already exists/],
  ])('refuses the domain form %j with a message next to %s', async (form, field, message) => {
    const b = await signedIn();
    const page = await b.get('/dashboard/domains');
    const r = await b.post('/dashboard/domains', { ...form, _csrf: Browser.csrf(page.text) });
    expect([409, 422]).toContain(r.status);
    expect(new RegExp(`id="${field}-error" class="field-error">([^<]*)<`).exec(r.text)?.[1]).toMatch(message);
  });

  it('refuses a rotation to a past date next to the field, and rotates to a new token otherwise', async () => {
    await createServiceAccount(store, 'proj', 'rot', FAR);
    const b = await signedIn();
    const confirm = await b.get('/dashboard/keys/rot/rotate');
    const csrf = Browser.csrf(confirm.text);
    const bad = await b.post('/dashboard/keys/rot/rotate', { _csrf: csrf, expires_at: '2001-01-01' });
    expect(bad.status).toBe(422);
    expect(/id="expires_at-error" class="field-error">([^<]*)</.exec(bad.text)?.[1]).toMatch(/future/);
    const before = (await store.getServiceAccount('proj', 'rot'))?.secretHash;
    const ok = await b.post('/dashboard/keys/rot/rotate', { _csrf: csrf, expires_at: SOON });
    expect(ok.status).toBe(201);
    expect(ok.headers.get('cache-control')).toBe('no-store');
    const newToken = /<code id="new-token">([^<]+)<\/code>/.exec(ok.text)?.[1] ?? '';
    expect(newToken).toMatch(/^ahsa_proj_rot_[0-9a-f]{64}$/);
    expect((await store.getServiceAccount('proj', 'rot'))?.secretHash).not.toBe(before);
    expect((await store.getServiceAccount('proj', 'rot'))?.expiresAt).toBe(`${SOON}T00:00:00.000Z`);
    // The new token signs in; the token is never in a log line.
    await signedIn(newToken);
    expect(server.logLines.join('')).not.toContain(newToken.slice(-64));
    expect(server.logLines.join('')).not.toContain(token.slice(-64));
  });

  it('keeps every form inside the session project: another project is never reached', async () => {
    const b = await signedIn();
    const csrf = Browser.csrf((await b.get('/dashboard/keys')).text);
    const attempts = [
      ['/dashboard/domains/theirs/unassign', {}],
      ['/dashboard/domains/theirs/assign', { app: 'hello' }],
      ['/dashboard/domains/shop/assign', { app: 'secret-app' }],
      ['/dashboard/keys/ci/revoke', {}],
      ['/dashboard/keys/ci/rotate', { expires_at: SOON }],
    ] as const;
    for (const [path, form] of attempts) {
      const r = await b.post(path, { ...form, _csrf: csrf, project_id: 'other' });
      expect([path, r.status]).toEqual([path, 404]);
    }
    expect((await b.get('/dashboard/apps/secret-app')).status).toBe(404);
    expect((await b.get('/dashboard/domains/theirs/unassign')).status).toBe(404);
    expect((await store.getDomain('other', 'theirs'))?.appName).toBe('hello');
    expect((await store.getDomain('proj', 'shop'))?.appName).toBe('hello');
    expect(await store.getServiceAccount('other', 'ci')).toBeDefined();
    // The other project's token sees its own data only.
    const o = await signedIn(otherToken);
    const domains = await o.get('/dashboard/domains');
    expect(domains.text).toContain('theirs.example.test');
    expect(domains.text).not.toContain('shop.example.test');
  });

  it('ends a session at once when its token is revoked elsewhere, and when it expires', async () => {
    const t = (await createServiceAccount(store, 'proj', 'soon', new Date(Date.now() + 3_600_000))).token;
    const b = await signedIn(t);
    expect((await b.get('/dashboard/keys')).status).toBe(200);
    // Another replica (or kubectl) deletes the account: no cache delays this.
    await store.revokeServiceAccount('proj', 'soon');
    const r = await b.get('/dashboard/keys');
    expect(r.status).toBe(303);
    expect(r.location).toBe('/dashboard/sign-in?ended=revoked');
    expect(b.cookies.has('apphost_session')).toBe(false);

    const t2 = (await createServiceAccount(store, 'proj', 'later', new Date(Date.now() + 3_600_000))).token;
    const b2 = await signedIn(t2);
    server.advance(3_600_001);
    try {
      const e = await b2.get('/dashboard/apps');
      expect(e.location).toBe('/dashboard/sign-in?ended=expired');
    } finally {
      server.advance(-3_600_001);
    }
  });

  it('revoking through the dashboard ends every session of that key', async () => {
    const t = (await createServiceAccount(store, 'proj', 'shared', FAR)).token;
    const one = await signedIn(t);
    const two = await signedIn(t);
    const admin = await signedIn();
    const confirm = await admin.get('/dashboard/keys/shared/revoke');
    expect(confirm.text).toContain('Revoke key shared?');
    const r = await admin.post('/dashboard/keys/shared/revoke', { _csrf: Browser.csrf(confirm.text) });
    expect(r.status).toBe(303);
    expect(r.location).toBe('/dashboard/keys?notice=revoked&name=shared');
    for (const b of [one, two])
      expect((await b.get('/dashboard/apps')).location).toMatch(/^\/dashboard\/sign-in/);
    expect(await server.sessions.get(one.cookies.get('apphost_session') ?? '')).toBeUndefined();
  });

  it('signs out: the session is gone on the server, not only in the browser', async () => {
    const b = await signedIn();
    const cookie = b.cookies.get('apphost_session') ?? '';
    const page = await b.get('/dashboard/apps');
    const r = await b.post('/dashboard/sign-out', { _csrf: Browser.csrf(page.text) });
    expect(r.location).toBe('/dashboard/sign-in?ended=signed-out');
    expect(await server.sessions.get(cookie)).toBeUndefined();
    const replay = new Browser(server.url);
    replay.cookies.set('apphost_session', cookie);
    expect((await replay.get('/dashboard/apps')).location).toBe('/dashboard/sign-in');
  });

  it('sends a CSP without inline script and the other security headers on every page', async () => {
    const b = await signedIn();
    for (const path of ['/dashboard/sign-in', '/dashboard/apps', '/dashboard/keys', '/dashboard/nope']) {
      const r = await b.get(path);
      const csp = r.headers.get('content-security-policy') ?? '';
      expect(csp).toMatch(/script-src 'self'/);
      expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
      expect(csp).toMatch(/frame-ancestors 'none'/);
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      expect(r.headers.get('cache-control')).toBe('no-store');
      expect(r.text).not.toMatch(/<script>|<script [^>]*>[^<]+<\/script>| on[a-z]+="/);
    }
    expect((await b.get('/dashboard/nope')).status).toBe(404);
  });

  it('serves its assets from the package, cacheable for good', async () => {
    const b = await signedIn();
    const html = (await b.get('/dashboard/apps')).text;
    const paths = [...html.matchAll(/(?:href|src)="(\/dashboard\/assets\/[^"]+)"/g)].map((m) => m[1] ?? '');
    expect(paths).toHaveLength(3);
    for (const p of paths) {
      const r = await b.get(p);
      expect(r.status).toBe(200);
      expect(r.headers.get('cache-control')).toMatch(/immutable/);
      expect(r.text.length).toBeGreaterThan(100);
    }
  });

  it("shows an app's version: the bundle its App names (full digest on its page), or a dash", async () => {
    const bundle = `sha256:${'ab'.repeat(32)}` as const;
    const dependencies = `sha256:${'cd'.repeat(32)}` as const;
    store.addApp('proj', 'packed', { runtime: 'cortex', code: { artifacts: { bundle, dependencies } } });
    const b = await signedIn();
    const apps = await b.get('/dashboard/apps');
    const packed = /<tr data-app="packed">[\s\S]*?<\/tr>/.exec(apps.text)?.[0] ?? '';
    expect(packed).toContain(`<code title="${bundle}">sha256:abababababab…</code>`);
    const hello = /<tr data-app="hello">[\s\S]*?<\/tr>/.exec(apps.text)?.[0] ?? '';
    expect(hello).toMatch(/data-label="Version">—</);
    const page = await b.get('/dashboard/apps/packed');
    expect(page.text).toContain(bundle);
    expect(page.text).toContain(dependencies);
  });

  it('refuses an oversized form with 413', async () => {
    const b = await signedIn();
    const r = await b.post('/dashboard/keys', { name: 'x'.repeat(20_000), _csrf: 'x' });
    expect(r.status).toBe(413);
  });
});
