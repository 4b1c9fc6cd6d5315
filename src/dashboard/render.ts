/** Server-side rendering with Eta: templates live in views/*.ts (shipped with the compiled code). */
import { Eta } from 'eta';
import type { Context } from 'koa';
import type { Assets } from './assets.ts';
import type { Session } from './sessions.ts';
import { APP, APPS } from './views/apps.ts';
import { CONFIRM, ERROR } from './views/confirm.ts';
import { DOMAINS } from './views/domains.ts';
import { KEY_TOKEN, KEYS } from './views/keys.ts';
import { LAYOUT } from './views/layout.ts';
import { RUN, RUN_RESULT, RUNS, RUNS_TABLE } from './views/runs.ts';
import { SIGN_IN } from './views/sign-in.ts';

const TEMPLATES = {
  layout: LAYOUT,
  signIn: SIGN_IN,
  keys: KEYS,
  keyToken: KEY_TOKEN,
  confirm: CONFIRM,
  error: ERROR,
  apps: APPS,
  app: APP,
  runs: RUNS,
  runsTable: RUNS_TABLE,
  run: RUN,
  runResult: RUN_RESULT,
  domains: DOMAINS,
} as const;
export type TemplateName = keyof typeof TEMPLATES;

export const SECTIONS = [
  { id: 'apps', label: 'Apps', href: '/dashboard/apps' },
  { id: 'runs', label: 'Runs', href: '/dashboard/runs' },
  { id: 'domains', label: 'Domains', href: '/dashboard/domains' },
  { id: 'keys', label: 'API Keys', href: '/dashboard/keys' },
] as const;
export type Section = (typeof SECTIONS)[number]['id'];

export interface Renderer {
  /** A fragment (no frame). */
  fragment(name: TemplateName, data: object): string;
  /** A whole page into ctx.body. */
  page(
    ctx: Context,
    opts: {
      title: string;
      section?: Section;
      session?: Session;
      notice?: string;
      template: TemplateName;
      data: object;
      status?: number;
    },
  ): void;
}

export function createRenderer(assets: Assets): Renderer {
  const eta = new Eta({ autoEscape: true, autoTrim: false, cache: true });
  for (const [name, text] of Object.entries(TEMPLATES)) eta.loadTemplate(`@${name}`, text);
  const urls = {
    css: `/dashboard/assets/${assets.css.name}`,
    htmx: `/dashboard/assets/${assets.htmx.name}`,
    script: `/dashboard/assets/${assets.script.name}`,
  };
  const fragment = (name: TemplateName, data: object) => eta.render(`@${name}`, data);
  return {
    fragment,
    page(ctx, o) {
      const body = fragment(o.template, o.data);
      ctx.status = o.status ?? 200;
      ctx.type = 'text/html; charset=utf-8';
      ctx.body = fragment('layout', {
        title: o.title,
        assets: urls,
        session: o.session,
        notice: o.notice,
        nav: SECTIONS.map((s) => ({ ...s, current: s.id === o.section })),
        body,
      });
    },
  };
}
