/**
 * One way to connect to NATS: every server of NATS_URL, the ping bounds of url.ts, reconnects forever,
 * logs every status change, and knows whether it is connected right now (what each /readyz reports).
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.ts';
import { natsClientOptions } from './url.ts';

export interface NatsHandle {
  nc: NatsConnection;
  /** Connected now (false from a disconnect until the reconnect, and once closed). */
  connected(): boolean;
  /** The /readyz check of a process that needs NATS. */
  readiness: { name: string; check: () => boolean };
}

export async function connectNats(opts: {
  /** NATS_URL: one server, or several of one cluster, comma-separated (url.ts). */
  url: string;
  /** Client name shown by the server, e.g. apphost-gateway. */
  name: string;
  /** Bound on the first connection (on each attempt, with `waitOnFirstConnect`). */
  timeoutMs: number;
  /**
   * Keep trying the first connection like a reconnect, forever, instead of failing after one attempt:
   * for a process that works without NATS meanwhile (the operator reconciles, only its autoscaler waits).
   */
  waitOnFirstConnect?: boolean;
  /**
   * With `waitOnFirstConnect`: give up after this long in all (the process exits and its supervisor
   * starts it again). For a piece that can do nothing without NATS but should not crash-loop while the
   * servers are still starting, e.g. right after `helm install`. Unset: keep trying.
   */
  firstConnectBoundMs?: number;
  log: Logger;
}): Promise<NatsHandle> {
  const pending = connect({
    ...natsClientOptions(opts.url),
    name: opts.name,
    maxReconnectAttempts: -1,
    timeout: opts.timeoutMs,
    ...(opts.waitOnFirstConnect ? { waitOnFirstConnect: true } : {}),
  });
  const nc = await withinBound(
    pending,
    opts.waitOnFirstConnect ? opts.firstConnectBoundMs : undefined,
    opts.url,
  );
  let up = true;
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') {
        up = false;
        opts.log.warn({ server: s.server }, 'NATS disconnected; reconnecting');
      } else if (s.type === 'reconnect') {
        up = true;
        opts.log.info({ server: s.server }, 'NATS reconnected');
      } else if (s.type === 'error') {
        opts.log.warn({ err: s.error }, 'NATS connection error');
      }
    }
  })();
  const connected = () => up && !nc.isClosed();
  return { nc, connected, readiness: { name: 'nats', check: connected } };
}

/** `pending`, or an error once `boundMs` has passed (a connection made later is closed). */
async function withinBound(
  pending: Promise<NatsConnection>,
  boundMs: number | undefined,
  url: string,
): Promise<NatsConnection> {
  if (boundMs === undefined) return pending;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      pending.then((nc) => nc.close()).catch(() => undefined);
      reject(new Error(`NATS (${url}) not reachable within ${boundMs} ms`));
    }, boundMs);
  });
  try {
    return await Promise.race([pending, late]);
  } finally {
    clearTimeout(timer);
  }
}
