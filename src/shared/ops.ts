/**
 * The operational endpoints every process has, on their own port so they never collide with
 * user-facing paths: GET /healthz (alive), /readyz (dependencies up, not draining), /metrics.
 */
import { createServer, type Server } from 'node:http';
import { listen } from './listen.ts';

/** What /metrics serves: a prom-client Registry, or anything that renders the same text (or its UTF-8 bytes). */
export interface MetricsSource {
  metrics(): Promise<string | Buffer>;
  readonly contentType: string;
}

export interface ReadinessCheck {
  name: string;
  check(): boolean | Promise<boolean>;
}

export interface OpsServer {
  readonly server: Server;
  /** Makes /readyz answer 503 from now on (first step of a graceful shutdown). */
  drain(): void;
  close(): Promise<void>;
  port(): number;
}

export async function startOpsServer(opts: {
  port: number;
  host?: string;
  registry: MetricsSource;
  checks: ReadinessCheck[];
}): Promise<OpsServer> {
  let draining = false;
  const server = createServer(async (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    try {
      if (path === '/healthz') {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      } else if (path === '/readyz') {
        const failing = await failingChecks(opts.checks);
        if (draining) failing.unshift('draining');
        res
          .writeHead(failing.length ? 503 : 200, { 'content-type': 'application/json' })
          .end(JSON.stringify(failing.length ? { status: 'not ready', failing } : { status: 'ok' }));
      } else if (path === '/metrics') {
        const body = await opts.registry.metrics();
        res.writeHead(200, { 'content-type': opts.registry.contentType }).end(body);
      } else {
        res
          .writeHead(404, { 'content-type': 'application/json' })
          .end('{"error":{"code":"not_found","message":"no such path"}}');
      }
    } catch {
      res
        .writeHead(500, { 'content-type': 'application/json' })
        .end('{"error":{"code":"internal","message":"internal error"}}');
    }
  });
  await listen(server, opts.port, opts.host ?? '0.0.0.0', 'APPHOST_OPS_PORT');
  return {
    server,
    drain: () => {
      draining = true;
    },
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
    port: () => {
      const a = server.address();
      return typeof a === 'object' && a ? a.port : opts.port;
    },
  };
}

/** The names of the checks that fail now, in order. */
export async function failingChecks(checks: ReadinessCheck[]): Promise<string[]> {
  const failing: string[] = [];
  for (const c of checks) if (!(await c.check())) failing.push(c.name);
  return failing;
}
