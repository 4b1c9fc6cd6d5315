/**
 * The dashboard in a real headless Chromium against `apphost dev` (a child process): sign in with the
 * keyboard; create a key and use its token on the management API; revoke it → 401; watch an async run
 * go queued → running → success with its webhook attempts; cancel a long run; unassign a domain and
 * see its host answer 404; sign out. Every page is screenshot at 1280 and 390 px wide.
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Browser, checkPage, launchBrowser, screenshot } from './browser.ts';
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
    pageProblems.push(...(await checkPage(page)).map((p) => `${name}: ${p}`));
    await screenshot(page, name);
  };
  const runAsync = async (query: string, body: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${creds.api_url}/v4/${creds.project_id}/slow/run?async=true${query}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${creds.run_token}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(202);
    return ((await res.json()) as { run_id: string }).run_id;
  };
  const row = (runId: string, state: string) => `tr[data-run="${runId}"][data-state="${state}"]`;

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
  });

  it('lists the apps; an app page has its URL, curl line, runs and configuration', async () => {
    expect(await page.textContent('main')).toMatch(/hello[\s\S]*slow[\s\S]*stream/);
    await shoot('apps');
    await page.click('a[href="/dashboard/apps/slow"]');
    await page.waitForURL(dash('/apps/slow'));
    const main = (await page.textContent('main')) ?? '';
    expect(main).toContain(`${creds.api_url}/v4/${creds.project_id}/slow`);
    expect(main).toContain('Authorization: Bearer $RUN_TOKEN');
    expect(main).toContain('responseGracePeriodSeconds: 120');
    expect(main).toContain('No runs of this app yet.');
    await shoot('app');
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
    await page.goto(dash('/runs'));
    expect(await page.textContent('main')).toContain('No runs yet.');
    await shoot('runs-empty');

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
    await page.waitForFunction(
      `document.querySelector('tr[data-run="${hooked}"] .attempts')?.textContent.includes('#1 200')`,
      undefined,
      { timeout: UI_TIMEOUT_MS },
    );
    expect(hooks.some((h) => h.requestId === hooked && h.body.includes('hooked'))).toBe(true);
    expect(hooks.some((h) => h.requestId === long)).toBe(false);

    await page.click(`tr[data-run="${hooked}"] th a`);
    await page.waitForURL(dash(`/runs/slow/${hooked}`));
    const detail = (await page.textContent('main')) ?? '';
    expect(detail).toMatch(/delivered/);
    expect(detail).toMatch(/#1/);
    expect(detail).toMatch(/success/);
    await shoot('run');

    // Filters: by state, by mode.
    await page.goto(dash('/runs?app=slow&state=cancelled'));
    expect(await page.$(row(long, 'cancelled'))).not.toBeNull();
    expect(await page.$(`tr[data-run="${hooked}"]`)).toBeNull();
    await page.goto(dash('/runs?mode=sync'));
    expect(await page.textContent('main')).toContain('No run matches this filter.');
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

  it('kept every page labelled, within the window at both widths, and free of console and CSP errors', () => {
    expect(pageProblems).toEqual([]);
    expect(browser.problems).toEqual([]);
  });
});
