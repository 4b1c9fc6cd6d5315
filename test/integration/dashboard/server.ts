/**
 * The management API with its dashboard on a loopback port: memory store, sessions in a real NATS KV
 * bucket, a movable clock, and every log line kept (to check that no token reaches one).
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import type { AppLiveness } from '../../../src/dashboard/context.ts';
import { dashboardSettings } from '../../../src/dashboard/mount.ts';
import { createKvSessionStore, type SessionStore } from '../../../src/dashboard/sessions.ts';
import type { DashboardSettings } from '../../../src/dashboard/settings.ts';
import { createManagementApi } from '../../../src/management/app.ts';
import type { LogSource } from '../../../src/management/logs/types.ts';
import type { DeliveryReader, RunReader } from '../../../src/management/readers.ts';
import type { ManagementStore } from '../../../src/management/store/types.ts';
import { type Clock, systemClock } from '../../../src/shared/clock.ts';
import { createLogger } from '../../../src/shared/log.ts';

export interface DashboardServer {
  url: string;
  sessions: SessionStore;
  logLines: string[];
  advance(ms: number): void;
  close(): Promise<void>;
}

export async function startDashboard(deps: {
  natsUrl: string;
  store: ManagementStore;
  runs: RunReader;
  deliveries: DeliveryReader;
  logs?: LogSource;
  settings?: Partial<DashboardSettings>;
  liveness?: AppLiveness;
}): Promise<DashboardServer> {
  let offset = 0;
  const clock: Clock = { now: () => systemClock.now() + offset, sleep: systemClock.sleep };
  const logLines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(chunk.toString());
      done();
    },
  });
  const nc: NatsConnection = await connect({ servers: deps.natsUrl });
  // A bucket per server, so test files never see each other's sessions.
  const kv = await new Kvm(nc).create(`dash_test_${randomBytes(4).toString('hex')}`, { history: 1 });
  const sessions = createKvSessionStore(kv);
  const app = createManagementApi({
    store: deps.store,
    runs: deps.runs,
    deliveries: deps.deliveries,
    ...(deps.logs ? { logs: deps.logs } : {}),
    log: createLogger({ name: 'management', level: 'debug', destination }),
    registry: new Registry(),
    clock,
    dashboard: {
      sessions,
      settings: dashboardSettings(deps.settings),
      apiUrl: () => 'http://api.test',
      ...(deps.liveness ? { liveness: deps.liveness } : {}),
    },
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    sessions,
    logLines,
    advance: (ms) => {
      offset += ms;
    },
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await kv.destroy();
      await nc.close();
    },
  };
}

/** A browser-like client: keeps cookies, never follows redirects (tests look at them). */
export class Browser {
  readonly cookies = new Map<string, string>();
  readonly base: string;
  readonly #fetch: typeof fetch;
  /** `fetchImpl`: how requests travel (e.g. through a cluster's ingress); the global fetch by default. */
  constructor(base: string, fetchImpl: typeof fetch = fetch) {
    this.base = base;
    this.#fetch = fetchImpl;
  }

  async request(
    method: string,
    path: string,
    opts: { form?: Record<string, string>; headers?: Record<string, string> } = {},
  ): Promise<{ status: number; headers: Headers; text: string; location: string | null }> {
    const headers: Record<string, string> = { ...opts.headers };
    if (this.cookies.size > 0) headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    let body: string | undefined;
    if (opts.form) {
      body = new URLSearchParams(opts.form).toString();
      headers['content-type'] ??= 'application/x-www-form-urlencoded';
    }
    const res = await this.#fetch(`${this.base}${path}`, { method, headers, body, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair = '', ...attrs] = c.split(';').map((s) => s.trim());
      const i = pair.indexOf('=');
      const name = pair.slice(0, i);
      const value = pair.slice(i + 1);
      const expired = attrs.some((a) => /^expires=/i.test(a) && Date.parse(a.slice(8)) < Date.now());
      if (!value || expired) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return {
      status: res.status,
      headers: res.headers,
      text: await res.text(),
      location: res.headers.get('location'),
    };
  }

  get(path: string, headers?: Record<string, string>) {
    return this.request('GET', path, headers ? { headers } : {});
  }
  post(path: string, form: Record<string, string>, headers?: Record<string, string>) {
    return this.request('POST', path, { form, ...(headers ? { headers } : {}) });
  }

  /** The CSRF token of the first form on a page. */
  static csrf(html: string): string {
    const m = /name="_csrf" value="([^"]+)"/.exec(html);
    if (!m?.[1]) throw new Error('no CSRF field on the page');
    return m[1];
  }

  async signIn(token: string): Promise<{ status: number; location: string | null; text: string }> {
    const page = await this.get('/dashboard/sign-in');
    return this.post('/dashboard/sign-in', { _csrf: Browser.csrf(page.text), token });
  }
}
