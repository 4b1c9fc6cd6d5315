/**
 * The gateway's public node:http server: in node mode the one on APPHOST_GATEWAY_PORT; in native mode the
 * one that takes the connections the data plane hands over whole (docs/design/native-data-plane.md §3a),
 * so that such a connection is served exactly as node mode serves it.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/** Keep-alive sockets idle longer than a typical load balancer's (60 s), so it never reuses a closed one. */
export const PUBLIC_KEEP_ALIVE_TIMEOUT_MS = 65_000;

export interface PublicServer {
  server: Server;
  /**
   * After SIGTERM: calls still arriving on kept-alive connections (a proxy's pool) are served and answered
   * with `Connection: close`, so the proxy retires each connection instead of racing our close.
   */
  handOver(): void;
}

export function createPublicServer(
  callback: (req: IncomingMessage, res: ServerResponse) => void,
): PublicServer {
  let handingOver = false;
  const server = createServer((req, res) => {
    if (handingOver) res.setHeader('Connection', 'close');
    callback(req, res);
  });
  server.keepAliveTimeout = PUBLIC_KEEP_ALIVE_TIMEOUT_MS;
  return {
    server,
    handOver() {
      handingOver = true;
    },
  };
}
