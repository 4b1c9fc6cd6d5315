/**
 * The "plain reverse proxy" baseline: Debian's nginx with one worker and a keep-alive upstream pool,
 * `proxy_pass` to the same runtime. Absent nginx → undefined, and the row says so.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, type ManagedProcess, startProcess, waitFor } from '../../test/harness/process.ts';
import { START_TIMEOUT_MS, STOP_GRACE_MS } from './parts.ts';

export const NGINX_PATHS = ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx'];

export function findNginx(): string | undefined {
  return NGINX_PATHS.find((p) => existsSync(p));
}

export interface Nginx {
  url: string;
  stop(): Promise<void>;
}

export function nginxConfig(opts: {
  dir: string;
  port: number;
  upstreamPort: number;
  asRoot: boolean;
}): string {
  const { dir } = opts;
  return `${opts.asRoot ? 'user root;\n' : ''}worker_processes 1;
daemon off;
master_process on;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${join(dir, 'body')};
  proxy_temp_path ${join(dir, 'proxy')};
  fastcgi_temp_path ${join(dir, 'fastcgi')};
  uwsgi_temp_path ${join(dir, 'uwsgi')};
  scgi_temp_path ${join(dir, 'scgi')};
  upstream runtime {
    server 127.0.0.1:${opts.upstreamPort};
    keepalive 64;
  }
  server {
    listen 127.0.0.1:${opts.port};
    keepalive_requests 1000000;
    location / {
      proxy_pass http://runtime;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`;
}

export async function startNginx(nginxPath: string, upstreamPort: number, dir: string): Promise<Nginx> {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    nginxConfig({
      dir,
      port,
      upstreamPort,
      asRoot: typeof process.getuid === 'function' && process.getuid() === 0,
    }),
  );
  const proc: ManagedProcess = startProcess(
    'nginx',
    nginxPath,
    ['-p', dir, '-c', conf, '-e', join(dir, 'error.log')],
    {
      logFile: join(dir, 'nginx.out.log'),
    },
  );
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor('nginx', async () => (await fetch(`${url}/ready`)).ok, START_TIMEOUT_MS);
  } catch (err) {
    await proc.stop(STOP_GRACE_MS);
    throw err;
  }
  return { url, stop: () => proc.stop(STOP_GRACE_MS) };
}
