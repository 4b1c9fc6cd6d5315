/** HTTP details of the dashboard: security headers, cookies, form bodies and CSRF checks. */
import { timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';

export const SESSION_COOKIE = 'apphost_session';
/** Double-submit CSRF cookie of the sign-in form (there is no session yet to hold its token). */
export const SIGN_IN_CSRF_COOKIE = 'apphost_sign_in_csrf';
export const CSRF_FIELD = '_csrf';
export const BASE = '/dashboard';

/** No inline scripts or styles, nothing from other origins, no framing. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  // Pico draws its form icons as data: SVG backgrounds.
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

export function setSecurityHeaders(ctx: Context): void {
  ctx.set('content-security-policy', CONTENT_SECURITY_POLICY);
  ctx.set('x-content-type-options', 'nosniff');
  ctx.set('x-frame-options', 'DENY');
  ctx.set('referrer-policy', 'same-origin');
  ctx.set('cross-origin-opener-policy', 'same-origin');
}

/** TLS seen directly or reported by the proxy in front: then cookies are Secure. A client that lies
 * here only gets a cookie it will not send back over plain HTTP. */
export function isHttps(ctx: Context): boolean {
  if ((ctx.req.socket as { encrypted?: boolean }).encrypted === true) return true;
  return ctx.get('x-forwarded-proto').split(',')[0]?.trim().toLowerCase() === 'https';
}

export function setCookie(
  ctx: Context,
  name: string,
  value: string,
  opts: { expires?: Date; path?: string } = {},
): void {
  const parts = [
    `${name}=${value}`,
    `Path=${opts.path ?? BASE}`,
    'HttpOnly',
    'SameSite=Strict',
    ...(opts.expires ? [`Expires=${opts.expires.toUTCString()}`] : []),
    ...(isHttps(ctx) ? ['Secure'] : []),
  ];
  ctx.append('set-cookie', parts.join('; '));
}

export function clearCookie(ctx: Context, name: string, path: string = BASE): void {
  setCookie(ctx, name, '', { expires: new Date(0), path });
}

export function readCookie(ctx: Context, name: string): string | undefined {
  for (const part of ctx.get('cookie').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim() || undefined;
  }
  return undefined;
}

export class FormError extends Error {
  readonly status: 403 | 413 | 415;
  constructor(status: 403 | 413 | 415, message: string) {
    super(message);
    this.status = status;
  }
}

/** An application/x-www-form-urlencoded body, bounded; each field's last value. */
export async function readForm(ctx: Context, limitBytes: number): Promise<Record<string, string>> {
  if (Number(ctx.get('content-length') || 0) > limitBytes)
    throw new FormError(413, `the form is larger than ${limitBytes} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limitBytes) throw new FormError(413, `the form is larger than ${limitBytes} bytes`);
    chunks.push(chunk);
  }
  if (size > 0 && !ctx.is('application/x-www-form-urlencoded'))
    throw new FormError(415, 'the form must be sent as application/x-www-form-urlencoded');
  return Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
}

export function sameSecret(given: string | undefined, expected: string): boolean {
  if (!given) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && a.length > 0 && timingSafeEqual(a, b);
}

/** A browser tells us when a request comes from another site; refuse those before reading anything. */
export function crossSite(ctx: Context): boolean {
  const site = ctx.get('sec-fetch-site');
  return site === 'cross-site' || site === 'same-site';
}
