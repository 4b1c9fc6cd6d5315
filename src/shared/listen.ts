import type { Server } from 'node:net';

/**
 * Starts `server` on host:port and resolves with the bound port. The start-up error listener is
 * removed once listening, so later server errors are not swallowed by it; a port in use names the
 * setting (`setting`) that moves it.
 */
export function listen(server: Server, port: number, host: string, setting: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE'
          ? new Error(`${host}:${port} is already in use; choose another with ${setting} (0 = any free port)`)
          : err,
      );
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      const a = server.address();
      resolve(typeof a === 'object' && a ? a.port : port);
    });
  });
}
