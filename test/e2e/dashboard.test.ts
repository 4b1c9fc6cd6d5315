/**
 * The dashboard in a real headless Chromium against `apphost dev` (a child process): sign in with the
 * keyboard; apps with their version and calls in flight; an app's live log tail, which stops when the
 * page goes away; create a key and use its token on the management API; revoke it → 401; watch an async
 * run go queued → running → success with its webhook attempts and its result; a streamed run's result;
 * sync calls with their mode and the mode filter; cancel a long run; unassign a domain and see its host
 * answer 404; sign out. Every page is screenshot at 1280 and 390 px wide.
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Browser, launchBrowser, screenshot } from './browser.ts';
import { type Credentials, type DevProcess, REPO, startDevProcess } from './dev-process.ts';

/** Bound on a page reaching a state it refreshes towards (runs finishing, htmx refreshes). */
const UI_TIMEOUT_MS = 60_000;

describe('dashboard in Chromium (e2e)', () => {
  let dir: string;
  let dev: DevProcess;
  let creds: Credentials;
  let browser: Browser;
  let page: Page;
  let receiver: Server;
  let receiverUrl: string;
  const hooks: Array<{ requestId: string; body: string }> = [];
  const pageProblems: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'apphost-e2e-dashboard-'));
    const appsDir = join(dir, 'apps');
    cpSync(join(REPO, 'examples', 'apps'), appsDir, { recursive: true });
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        hooks.push({
          requestId: String(req.headers['x-request-id']),
          body: Buffer.concat(chunks).toString(),
        });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const addr = receiver.address();
    receiverUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}/hook`;
    // One async run at a time, so a second run visibly waits `queued` behind a long one.
    [dev, browser] = await Promise.all([
      startDevProcess({
        appsDir,
        stateDir: join(dir, 'state'),
        credentialsFile: join(dir, 'credentials.json'),
        env: { APPHOST_RUN_CONCURRENCY: '1' },
      }),
      launchBrowser(),
    ]);
    creds = dev.creds;
    page = browser.page;
  });

  afterAll(async () => {
    await browser?.close();
    dev?.kill();
    await new Promise<void>((r) => (receiver ? receiver.close(() => r()) : r()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const dash = (path = '') => `${creds.base_url}/dashboard${path}`;
  const shoot = async (name: string) => {
    pageProblems.push(...(await screenshot(page, name)).map((p) => `${name}: ${p}`));
  };
  const runAsync = async (
    query: string,
    body: unknown,
    headers: Record<string, string> = {},
    app = 'slow',
  ) => {
    const res = await fetch(`${creds.api_url}/v4/${creds.project_id}/${app}/run?async=true${query}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${creds.run_token}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(202);
    return ((await res.json()) as { run_id: string }).run_id;
  };
  const row = (runId: string, state: string) => `tr[data-run="${runId}"][data-state="${state}"]`;
  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${creds.base_url}/v2/projects/${creds.project_id}${path}`, {
      headers: { authorization: `Bearer ${creds.service_account_token}` },
    });
    expect(res.status).toBe(200);
    return (await res.json()) as T;
  };
  const syncCall = (app: string, body: unknown, signal?: AbortSignal) =>
    fetch(`${creds.api_url}/v4/${creds.project_id}/${app}/run`, {
      method: 'POST',
      headers: { authorization: `Bearer ${creds.run_token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
  /** Reloads `url` until `check` holds on the page (bounded). */
  const reloadUntil = async (url: string, what: string, check: () => Promise<boolean>) => {
    const deadline = Date.now() + UI_TIMEOUT_MS;
    for (;;) {
      await page.goto(url);
      if (await check()) return;
      if (Date.now() > deadline) throw new Error(`${what}: not seen within ${UI_TIMEOUT_MS} ms`);
      await new Promise((r) => setTimeout(r, 250));
    }
  };

  it('redirects to sign-in, refuses a bad token next to the field, and signs in with the keyboard', async () => {
    await page.goto(`${creds.base_url}/`);
    expect(new URL(page.url()).pathname).toBe('/dashboard/sign-in');
    await shoot('sign-in');
    // The token field has the focus on load: type, Enter.
    expect(await page.evaluate('document.activeElement.id')).toBe('token');
    await page.keyboard.type('ahsa_local_nobody_0123');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#token-error');
    expect(await page.textContent('#token-error')).toMatch(/not a service-account token/);
    expect(await page.getAttribute('#token', 'aria-invalid')).toBe('true');
    await page.fill('#token', creds.service_account_token);
    await page.keyboard.press('Enter');
    await page.waitForURL(dash('/apps'));
    expect(page.url()).not.toContain(creds.service_account_token);
    // On every page the first Tab reaches "Skip to content", which moves the focus to the content.
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.textContent')).toBe('Skip to content');
    await page.keyboard.press('Enter');
    expect(await page.evaluate('document.activeElement.id')).toBe('main');
    // Before any call: the empty state tells a new user what to do.
    await page.goto(dash('/runs'));
    expect(await page.textContent('main')).toContain('No runs yet.');
    await shoot('runs-empty');
    await page.goto(dash('/apps'));
  });

  it('lists the apps with the version that runs and the calls in flight', async () => {
    expect(await page.textContent('main')).toMatch(/hello[\s\S]*slow[\s\S]*stream/);
    // apphost dev deploys each app folder through the build pipeline: the build is the version.
    const { apps } = await api<{ apps: Array<{ name: string; build_id?: string }> }>('/apps');
    const hello = apps.find((a) => a.name === 'hello')?.build_id ?? '';
    expect(hello).not.toBe('');
    expect(await page.textContent('tr[data-app="hello"] td[data-label="Version"]')).toContain(hello);
    // A sync call held in the slow app is in flight; the page shows it (the in-process balancer's count).
    const held = new AbortController();
    const call = syncCall('slow', { seconds: 20, label: 'held' }, held.signal).catch(() => undefined);
    await reloadUntil(
      dash('/apps'),
      'one call in flight to slow',
      async () => (await page.textContent('tr[data-app="slow"] td[data-label="In flight"]'))?.trim() === '1',
    );
    await shoot('apps');
    // The caller gives up: the sync call is recorded as cancelled (see the mode filter below).
    held.abort();
    await call;
  });

  it('an app page has its URL, curl line, version, runs, configuration and a live log tail that stops when the page goes away', async () => {
    await page.click('a[href="/dashboard/apps/hello"]');
    await page.waitForURL(dash('/apps/hello'));
    const main = (await page.textContent('main')) ?? '';
    expect(main).toContain(`${creds.api_url}/v4/${creds.project_id}/hello`);
    expect(main).toContain('Authorization: Bearer $RUN_TOKEN');
    expect(main).toMatch(/Version\s*build \S+/);
    expect(main).toMatch(/Bundle\s*sha256:[0-9a-f]{64}/);
    await page.waitForSelector('#log-tail[data-log-state="live"]', { timeout: UI_TIMEOUT_MS });
    // A call made now shows up in the tail: the runtime logs each call with its request id.
    const res = await syncCall('hello', { name: 'tail' });
    expect(res.status).toBe(200);
    const rid = res.headers.get('x-request-id') ?? '';
    // Locator waits, not waitForFunction: its polling evaluates a string, which the page's CSP refuses.
    await page.locator('#log-tail', { hasText: rid }).waitFor({ timeout: UI_TIMEOUT_MS });
    // The call is also one of the app's recent runs (a sync record, written after the response).
    await reloadUntil(dash('/apps/hello'), `sync call ${rid} among the recent runs`, () =>
      page.isVisible(`${row(rid, 'success')} span.mode:text-is("sync")`),
    );
    await page.waitForSelector('#log-tail[data-log-state="live"]', { timeout: UI_TIMEOUT_MS });
    await shoot('app');
    // Leaving the page closes the stream (the browser cancels it; the server then ends its follow).
    const closed = new Promise<string>((resolve) => {
      const seen = (r: { url(): string }) => {
        if (r.url().endsWith('/dashboard/apps/hello/logs')) resolve(r.url());
      };
      page.on('requestfailed', seen);
      page.on('requestfinished', seen);
    });
    await page.goto(dash('/apps/slow'));
    await Promise.race([
      closed,
      new Promise((_r, fail) => setTimeout(() => fail(new Error('log stream still open')), UI_TIMEOUT_MS)),
    ]);
    expect(await page.textContent('main')).toContain('responseGracePeriodSeconds: 120');
  });

  it('creates a key whose token works on the management API, and revokes it (then 401)', async () => {
    await page.goto(dash('/keys'));
    await shoot('keys');
    // Bad input first: the message sits next to the field and the values typed are kept.
    await page.fill('#name', 'CI key');
    await page.fill('#expires_at', '2020-01-01');
    await page.click('form[action="/dashboard/keys"] button[type=submit]');
    await page.waitForSelector('#name-error');
    expect(await page.textContent('#name-error')).toMatch(/DNS label/);
    expect(await page.inputValue('#name')).toBe('CI key');
    await page.fill('#name', 'ci-e2e');
    await page.fill('#expires_at', new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10));
    await page.click('form[action="/dashboard/keys"] button[type=submit]');
    await page.waitForSelector('#new-token');
    const token = ((await page.textContent('#new-token')) ?? '').trim();
    expect(token).toMatch(/^ahsa_local_ci-e2e_[0-9a-f]{64}$/);
    expect(await page.isVisible('button[data-copy="new-token"]')).toBe(true);
    await shoot('key-created');

    const domains = `${creds.base_url}/v2/projects/${creds.project_id}/domains`;
    const use = () => fetch(domains, { headers: { authorization: `Bearer ${token}` } });
    expect((await use()).status).toBe(200);

    await page.goto(dash('/keys'));
    expect(await page.textContent('main')).not.toContain(token);
    await page.click('tr[data-key="ci-e2e"] a[href$="/revoke"]');
    await page.waitForURL(dash('/keys/ci-e2e/revoke'));
    await shoot('key-revoke');
    await page.click('main form button[type=submit]');
    await page.waitForURL(/\/dashboard\/keys\?notice=revoked/);
    expect(await page.textContent('.notice')).toMatch(/ci-e2e is revoked/);
    expect(await page.$('tr[data-key="ci-e2e"]')).toBeNull();
    expect((await use()).status).toBe(401);
  });

  it('shows an async run queued → running → success with its webhook attempts, and cancels a long run', {
    timeout: 240_000,
  }, async () => {
    await page.goto(dash('/runs?mode=async'));
    expect(await page.textContent('main')).toContain('No run matches this filter.');

    const long = await runAsync('', { seconds: 60, label: 'long' });
    await page.goto(dash('/runs?app=slow'));
    await page.waitForSelector(row(long, 'running'), { timeout: UI_TIMEOUT_MS });
    const hooked = await runAsync(
      `&webhookEndpoint=${encodeURIComponent(receiverUrl)}`,
      { seconds: 3, label: 'hooked' },
      { 'x-webhook-secret': 'e2e-secret' },
    );
    // The page refreshes itself (htmx): the new run appears, waiting behind the long one.
    await page.waitForSelector(row(hooked, 'queued'), { timeout: UI_TIMEOUT_MS });
    expect(await page.textContent(`tr[data-run="${hooked}"] .mode`)).toBe('async');
    await shoot('runs');

    await page.click(`tr[data-run="${long}"] button[type=submit]`);
    await page.waitForURL(dash('/runs?app=slow'));
    // Every state the page shows for the waiting run from now on is noted in the page itself, so none
    // is missed between two looks of ours.
    await page.evaluate(`(() => {
      const now = () => document.querySelector('tr[data-run="${hooked}"]')?.getAttribute('data-state');
      window.seenStates = [now()];
      new MutationObserver(() => {
        const state = now();
        if (state && window.seenStates[window.seenStates.length - 1] !== state) window.seenStates.push(state);
      }).observe(document.body, { subtree: true, childList: true, attributes: true });
    })()`);
    await page.waitForSelector(row(long, 'cancelled'), { timeout: UI_TIMEOUT_MS });
    await page.waitForSelector(row(hooked, 'success'), { timeout: UI_TIMEOUT_MS });
    const seen = (await page.evaluate('window.seenStates')) as string[];
    expect(seen.slice(seen.indexOf('running'))).toEqual(['running', 'success']);
    await page
      .locator(`tr[data-run="${hooked}"] .attempts`, { hasText: '#1 200' })
      .waitFor({ timeout: UI_TIMEOUT_MS });
    expect(hooks.some((h) => h.requestId === hooked && h.body.includes('hooked'))).toBe(true);
    expect(hooks.some((h) => h.requestId === long)).toBe(false);

    // The result: its type and size in the row; its body loaded when the row is opened.
    expect(await page.textContent(`tr[data-run="${hooked}"] .result-summary`)).toMatch(/application\/json/);
    await page.click(`tr[data-run="${hooked}"] details.result-row summary`);
    await page.waitForSelector(`tr[data-run="${hooked}"] .result-body pre.result`, {
      timeout: UI_TIMEOUT_MS,
    });
    expect(await page.textContent(`tr[data-run="${hooked}"] .result-body`)).toContain('"label": "hooked"');
    await shoot('runs-result');

    await page.click(`tr[data-run="${hooked}"] th a`);
    await page.waitForURL(dash(`/runs/slow/${hooked}`));
    const detail = (await page.textContent('main')) ?? '';
    expect(detail).toMatch(/delivered/);
    expect(detail).toMatch(/#1/);
    expect(detail).toMatch(/success/);
    // Pretty-printed JSON, as the function returned it.
    expect(await page.textContent('pre.result')).toContain('{\n  "label": "hooked",\n  "slept_seconds": 3');
    await shoot('run');

    // A generator's run keeps its events, marked streamed.
    const streamed = await runAsync('', {}, {}, 'stream');
    await reloadUntil(dash(`/runs/stream/${streamed}`), 'the streamed run finished', async () =>
      Boolean(await page.$('.state-success')),
    );
    expect(await page.textContent('[data-mark="streamed"]')).toMatch(/event stream as it was sent/);
    expect(await page.textContent('pre.result')).toContain('data: {"n": 1, "of": 5}');

    // Filters: by state, by mode (sync calls are recorded too, with their mode).
    await page.goto(dash('/runs?app=slow&state=cancelled'));
    expect(await page.$(row(long, 'cancelled'))).not.toBeNull();
    expect(await page.$(`tr[data-run="${hooked}"]`)).toBeNull();
    // The sync call the apps test gave up on: recorded as cancelled, mode sync.
    await page.goto(dash('/runs?mode=sync&app=slow'));
    const held = (await page.getAttribute('tr[data-state="cancelled"]', 'data-run')) ?? '';
    expect(held).not.toBe('');
    expect(new Set(await page.$$eval('tr[data-run] .mode', (els) => els.map((e) => e.textContent)))).toEqual(
      new Set(['sync']),
    );
    expect(await page.$(`tr[data-run="${hooked}"]`)).toBeNull();
    await shoot('runs-sync');
    await page.goto(dash('/runs?mode=async&app=slow'));
    expect(await page.$(`tr[data-run="${held}"]`)).toBeNull();
    expect(await page.$(row(hooked, 'success'))).not.toBeNull();
  });

  it('unassigns a domain after a confirmation, and its host then answers 404', async () => {
    const viaHost = () =>
      new Promise<number>((done, fail) => {
        const u = new URL(creds.api_url);
        const req = request(
          {
            host: u.hostname,
            port: u.port,
            path: '/run',
            method: 'POST',
            headers: {
              host: 'hello.localhost',
              authorization: `Bearer ${creds.run_token}`,
              'content-type': 'application/json',
            },
          },
          (res) => {
            res.resume();
            res.on('end', () => done(res.statusCode ?? 0));
          },
        );
        req.on('error', fail);
        req.end('{"name":"domain"}');
      });
    expect(await viaHost()).toBe(200);
    await page.goto(dash('/domains'));
    expect(await page.textContent('tr[data-domain="hello-local"]')).toMatch(
      /hello\.localhost[\s\S]*hello[\s\S]*Routed/,
    );
    await shoot('domains');
    await page.click('tr[data-domain="hello-local"] a[href$="/unassign"]');
    await page.waitForURL(dash('/domains/hello-local/unassign'));
    await shoot('domain-unassign');
    await page.click('main form button[type=submit]');
    await page.waitForURL(/\/dashboard\/domains\?notice=unassigned/);
    expect(await page.textContent('tr[data-domain="hello-local"]')).toMatch(/Unassigned/);
    expect(await viaHost()).toBe(404);
  });

  it('signs out: the pages then lead to sign-in', async () => {
    await page.click('form.sign-out button');
    await page.waitForURL(/\/dashboard\/sign-in\?ended=signed-out/);
    expect(await page.textContent('.notice')).toMatch(/signed out/);
    await page.goto(dash('/keys'));
    expect(new URL(page.url()).pathname).toBe('/dashboard/sign-in');
  });

  it('kept every page labelled, within the window and free of axe-core WCAG 2.1 AA violations at both widths and in the dark scheme, and free of console and CSP errors', () => {
    expect(pageProblems).toEqual([]);
    expect(browser.problems).toEqual([]);
  });
});
