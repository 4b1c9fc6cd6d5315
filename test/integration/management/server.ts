/** Starts the real management API on a loopback port, with a clock tests can move forward. */
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { createManagementApi } from '../../../src/management/app.ts';
import type { ManagementSettings } from '../../../src/management/context.ts';
import type { DeployApi } from '../../../src/management/deploy-api.ts';
import type { LogSource } from '../../../src/management/logs/types.ts';
import type { DeliveryReader, RunReader } from '../../../src/management/readers.ts';
import type { ManagementStore } from '../../../src/management/store/types.ts';
import { type Clock, systemClock } from '../../../src/shared/clock.ts';
import { silentLogger } from '../../../src/shared/log.ts';

export interface RunningApi {
  url: string;
  registry: Registry;
  /** Moves the API's clock forward (expiry and cache tests). */
  advance(ms: number): void;
  close(): Promise<void>;
}

export async function startApi(deps: {
  store: ManagementStore;
  runs: RunReader;
  deliveries: DeliveryReader;
  logs?: LogSource;
  deploy?: DeployApi;
  settings?: Partial<ManagementSettings>;
}): Promise<RunningApi> {
  let offset = 0;
  const clock: Clock = { now: () => systemClock.now() + offset, sleep: systemClock.sleep };
  const registry = new Registry();
  const app = createManagementApi({ ...deps, log: silentLogger(), registry, clock });
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    registry,
    advance: (ms) => {
      offset += ms;
    },
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export interface CallResult {
  status: number;
  headers: Headers;
  body: unknown;
  text: string;
}

export async function call(
  base: string,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<CallResult> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}
