/**
 * A real headless Chromium (Debian's package, never a download) driven by playwright-core, with a
 * fresh profile per launch. Screenshots go to test/e2e/.out/screenshots, or to docs/img when
 * APPHOST_UPDATE_SCREENSHOTS=1 (the committed ones the docs show).
 */
import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { REPO } from './dev-process.ts';

export const CHROMIUM = process.env.APPHOST_CHROMIUM || '/usr/bin/chromium';
/** Bound on Chromium starting (a busy 2-core machine). */
export const BROWSER_LAUNCH_TIMEOUT_MS = 60_000;
export const WIDTHS = [1280, 390] as const;
/** axe-core's rules the pages must pass: WCAG 2.0/2.1 A and AA (contrast, names, landmarks, …). */
const AXE_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'];
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

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
 * `checkPage` finds wrong at each width and in the dark colour scheme, prefixed with which.
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
  // The dark colour scheme (the stylesheet follows prefers-color-scheme) must pass the same checks.
  await page.emulateMedia({ colorScheme: 'dark' });
  problems.push(...(await checkPage(page)).map((p) => `dark: ${p}`));
  await page.emulateMedia({ colorScheme: 'light' });
  return problems;
}

/**
 * Accessibility basics a page must keep: every visible control has a label, one h1, nothing scrolls
 * sideways (naming the first element that sticks out), and no axe-core violation of AXE_TAGS.
 */
export async function checkPage(page: Page): Promise<string[]> {
  // Evaluated by the debugger protocol, so the page's CSP (no eval, scripts from 'self') allows it.
  if (!(await page.evaluate('typeof window.axe !== "undefined"'))) await page.evaluate(AXE_SOURCE);
  const axe =
    (await page.evaluate(`axe.run(document, { runOnly: { type: 'tag', values: ${JSON.stringify(AXE_TAGS)} } })
    .then((r) => r.violations.map((v) => 'axe ' + v.id + ' (' + v.impact + '): ' + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')))`)) as string[];
  // A string: the test tsconfig has no DOM types.
  const basics = (await page.evaluate(`(() => {
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
  })()`)) as string[];
  return [...basics, ...axe];
}
