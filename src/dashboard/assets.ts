/**
 * The dashboard's static files, all served by us (no CDN: it works offline): one stylesheet (Pico
 * with our few rules appended), htmx from its npm package, and our small script. Names carry a
 * content hash so browsers may cache them for good.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { DASHBOARD_CSS } from './static/dashboard-css.ts';
import { DASHBOARD_JS } from './static/dashboard-js.ts';

export interface Asset {
  /** URL path under /dashboard/assets/. */
  name: string;
  type: string;
  body: Buffer;
}

const require = createRequire(import.meta.url);
const fromPackage = (id: string) => readFileSync(require.resolve(id));

function asset(base: string, ext: string, type: string, body: Buffer): Asset {
  const hash = createHash('sha256').update(body).digest('hex').slice(0, 12);
  return { name: `${base}.${hash}.${ext}`, type, body };
}

export interface Assets {
  css: Asset;
  htmx: Asset;
  script: Asset;
  byName: Map<string, Asset>;
}

export function loadAssets(): Assets {
  const css = asset(
    'dashboard',
    'css',
    'text/css; charset=utf-8',
    Buffer.concat([fromPackage('@picocss/pico/css/pico.min.css'), Buffer.from(`\n${DASHBOARD_CSS}`)]),
  );
  const htmx = asset(
    'htmx',
    'js',
    'text/javascript; charset=utf-8',
    fromPackage('htmx.org/dist/htmx.min.js'),
  );
  const script = asset('dashboard', 'js', 'text/javascript; charset=utf-8', Buffer.from(DASHBOARD_JS));
  return { css, htmx, script, byName: new Map([css, htmx, script].map((a) => [a.name, a])) };
}
