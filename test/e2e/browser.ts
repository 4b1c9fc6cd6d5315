/**
 * A real headless Chromium (Debian's package, never a download) driven by playwright-core, with a
 * fresh profile per launch. Screenshots go to test/e2e/.out/screenshots, or to docs/img when
 * APPHOST_UPDATE_SCREENSHOTS=1 (the committed ones the docs show).
 */
import { accessSync, constants, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { REPO } from './dev-process.ts';

export const CHROMIUM = process.env.APPHOST_CHROMIUM || '/usr/bin/chromium';
/** Bound on Chromium starting (a busy 2-core machine). */
export const BROWSER_LAUNCH_TIMEOUT_MS = 60_000;
export const WIDTHS = [1280, 390] as const;

const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Console errors and CSP violations seen so far. */
  problems: string[];
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<Browser> {
  try {
    accessSync(CHROMIUM, constants.X_OK);
  } catch {
    throw new Error(
      `Chromium not found at ${CHROMIUM}: run 'make deps' (it installs Debian's chromium with apt-get) or set APPHOST_CHROMIUM`,
    );
  }
  const profile = mkdtempSync(join(tmpdir(), 'apphost-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: WIDTHS[0], height: 800 },
    timeout: BROWSER_LAUNCH_TIMEOUT_MS,
    reducedMotion: 'reduce',
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const problems: string[] = [];
  page.on('console', (m) => {
    // A refused form (401/422) is an answer the tests ask for, not a problem of the page.
    if (m.type() === 'error' && !/Failed to load resource: .* status of (401|422)\b/.test(m.text()))
      problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  return {
    context,
    page,
    problems,
    close: async () => {
      await context.close().catch(() => undefined);
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export const SCREENSHOT_DIR =
  process.env.APPHOST_UPDATE_SCREENSHOTS === '1'
    ? join(REPO, 'docs', 'img')
    : join(REPO, 'test', 'e2e', '.out', 'screenshots');

/**
 * The page as it is now, at every width (then back to the first): a screenshot of each, and what
 * `checkPage` finds wrong at each width, prefixed with it.
 */
export async function screenshot(page: Page, name: string): Promise<string[]> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const problems: string[] = [];
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 800 });
    problems.push(...(await checkPage(page)).map((p) => `${width} px: ${p}`));
    await page.screenshot({ path: join(SCREENSHOT_DIR, `dashboard-${name}-${width}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: WIDTHS[0], height: 800 });
  return problems;
}

/**
 * Accessibility basics a page must keep: every visible control has a label, one h1, nothing scrolls
 * sideways (naming the first element that sticks out).
 */
export async function checkPage(page: Page): Promise<string[]> {
  // A string: the test tsconfig has no DOM types.
  return page.evaluate(`(() => {
    const out = [];
    for (const el of document.querySelectorAll('input:not([type=hidden]), select, textarea'))
      if (!el.labels || el.labels.length === 0) out.push('unlabelled ' + el.tagName.toLowerCase() + '#' + el.id);
    if (document.querySelectorAll('main h1').length !== 1) out.push('not exactly one h1 in main');
    if (document.documentElement.scrollWidth > window.innerWidth + 1) {
      const wide = [...document.body.querySelectorAll('*')].find((el) => el.getBoundingClientRect().right > window.innerWidth + 1);
      const what = wide ? wide.tagName.toLowerCase() + (wide.id ? '#' + wide.id : '') + (wide.className ? '.' + String(wide.className).trim().split(/ +/).join('.') : '') : '?';
      out.push('page is wider (' + document.documentElement.scrollWidth + ') than the window (' + window.innerWidth + '): ' + what);
    }
    return out;
  })()`);
}
