/**
 * Where the API server is and how to authenticate to it, for the small read-only client (reader.ts), read
 * the way client-node's `KubeConfig.loadFromDefault` reads it: the kubeconfig file named (the first of a
 * `:`-separated list), else `~/.kube/config`, else the pod's service account (KUBERNETES_SERVICE_HOST/PORT,
 * its CA and token files), else `http://localhost:8080`. Files named by the configuration — the
 * service-account token, a `tokenFile`, CA and client certificate files — are read again later (a token
 * every TOKEN_REREAD_MS, TLS material whenever the client renews its connections), so rotated credentials
 * are used without a restart.
 *
 * Supported in a kubeconfig's current context: `server`, `certificate-authority(-data)`,
 * `insecure-skip-tls-verify`, `tls-server-name`; `client-certificate(-data)` + `client-key(-data)`, `token`,
 * `tokenFile`, and impersonation (`as`, `as-groups`, `as-uid`). A user with `exec`, `auth-provider` or
 * `username`/`password`, or a cluster with `proxy-url`, is reported as `unsupported` (with why): the caller
 * then uses @kubernetes/client-node, which handles those.
 */
import { existsSync, readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { dirname, isAbsolute, join } from 'node:path';

/** How often a token read from a file is read again (client-go re-reads its token file every minute). */
export const TOKEN_REREAD_MS = 60_000;

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface KubeTls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  /** false with `insecure-skip-tls-verify`. */
  rejectUnauthorized: boolean;
  servername?: string;
}

export interface KubeAccess {
  /** The API server's URL, without a trailing slash (may carry a path prefix). */
  server: string;
  /** TLS material, with files read now. */
  tls(): KubeTls;
  /** Headers of every request: Authorization (a token file read at most every TOKEN_REREAD_MS), impersonation. */
  headers(): Record<string, string | string[]>;
  /** Where this came from, for logs: a file, `in-cluster` or `default`. */
  source: string;
}

/** What a kubeconfig asks for that this loader does not do. */
export interface UnsupportedAccess {
  unsupported: string;
  source: string;
}

export interface KubeAccessEnv {
  KUBERNETES_SERVICE_HOST?: string | undefined;
  KUBERNETES_SERVICE_PORT?: string | undefined;
}

/** A kubeconfig that cannot be used at all (no current context, no server, a missing file...). */
export class KubeConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KubeConfigError';
  }
}

export async function loadKubeAccess(opts: {
  /** The piece's KUBECONFIG setting (`:`-separated; the first file is used). */
  kubeconfig?: string | undefined;
  env: KubeAccessEnv;
  home?: string | undefined;
  serviceAccountDir?: string;
  now?: () => number;
}): Promise<KubeAccess | UnsupportedAccess> {
  const now = opts.now ?? Date.now;
  const file =
    opts.kubeconfig?.split(':').find((p) => p !== '') ??
    (opts.home && existsSync(join(opts.home, '.kube', 'config'))
      ? join(opts.home, '.kube', 'config')
      : undefined);
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new KubeConfigError(`kubeconfig ${file}: ${(err as Error).message}`);
    }
    return kubeAccessFromKubeconfig(text, { source: file, dir: dirname(file), now });
  }
  const sa = opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  if (existsSync(join(sa, 'token'))) return inClusterAccess(opts.env, sa, now);
  return {
    server: 'http://localhost:8080',
    tls: () => ({ rejectUnauthorized: true }),
    headers: () => ({}),
    source: 'default',
  };
}

/** The pod's service account: the API server's Service address, its CA, its token (re-read: it rotates). */
export function inClusterAccess(env: KubeAccessEnv, dir: string, now: () => number = Date.now): KubeAccess {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port)
    throw new KubeConfigError(
      'in-cluster Kubernetes access needs KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (set by the kubelet)',
    );
  // As client-node: these ports are plain HTTP (a kubectl proxy), any other is TLS.
  const scheme = port === '80' || port === '8080' || port === '8001' ? 'http' : 'https';
  const token = fileToken(join(dir, 'token'), now);
  const ca = join(dir, 'ca.crt');
  return {
    server: `${scheme}://${isIPv6(host) ? `[${host}]` : host}:${port}`,
    tls: () => ({ ca: readFileSync(ca), rejectUnauthorized: true }),
    headers: () => ({ authorization: `Bearer ${token()}` }),
    source: 'in-cluster',
  };
}

/** Reads `path` now and again once TOKEN_REREAD_MS passed; a failed re-read keeps the last token. */
function fileToken(path: string, now: () => number): () => string {
  let token = readFileSync(path, 'utf8').trim();
  let readAt = now();
  return () => {
    if (now() - readAt >= TOKEN_REREAD_MS) {
      readAt = now();
      try {
        token = readFileSync(path, 'utf8').trim();
      } catch {
        // Keep the previous token; the API server's 401 says so if it expired.
      }
    }
    return token;
  };
}

type Entry<K extends string, T> = { name?: string } & { [key in K]?: T };
interface KubeconfigCluster {
  server?: string;
  'certificate-authority'?: string;
  'certificate-authority-data'?: string;
  'insecure-skip-tls-verify'?: boolean;
  'tls-server-name'?: string;
  'proxy-url'?: string;
}
interface KubeconfigUser {
  token?: string;
  tokenFile?: string;
  /** client-node's spelling of tokenFile. */
  'token-file'?: string;
  'client-certificate'?: string;
  'client-certificate-data'?: string;
  'client-key'?: string;
  'client-key-data'?: string;
  as?: string;
  'as-groups'?: string[];
  'as-uid'?: string;
  exec?: unknown;
  'auth-provider'?: unknown;
  username?: string;
  password?: string;
}
interface Kubeconfig {
  'current-context'?: string;
  contexts?: Array<Entry<'context', { cluster?: string; user?: string }>>;
  clusters?: Array<Entry<'cluster', KubeconfigCluster>>;
  users?: Array<Entry<'user', KubeconfigUser>>;
}

/** The access a kubeconfig's current context gives; relative file paths are relative to `dir`. */
export async function kubeAccessFromKubeconfig(
  text: string,
  opts: { source: string; dir: string; now?: () => number },
): Promise<KubeAccess | UnsupportedAccess> {
  const { source, dir } = opts;
  const now = opts.now ?? Date.now;
  // yaml only for kubeconfig files: a pod's gateway (in-cluster) does not load it.
  const { parse } = await import('yaml');
  let doc: Kubeconfig;
  try {
    // prettyErrors off: yaml's message would quote the offending line, which may be a token or a key.
    doc = (parse(text, { prettyErrors: false }) ?? {}) as Kubeconfig;
  } catch (err) {
    const { message, pos } = err as { message: string; pos?: [number, number] };
    const at = pos ? text.slice(0, pos[0]).split('\n') : undefined;
    const where = at ? ` (line ${at.length}, column ${(at.at(-1)?.length ?? 0) + 1})` : '';
    throw new KubeConfigError(`kubeconfig ${source}: not YAML: ${message}${where}`);
  }
  const fail = (what: string) => new KubeConfigError(`kubeconfig ${source}: ${what}`);
  const current = doc['current-context'];
  if (!current) throw fail('no current-context');
  const context = doc.contexts?.find((c) => c.name === current)?.context;
  if (!context?.cluster) throw fail(`context "${current}" is missing or names no cluster`);
  const cluster = doc.clusters?.find((c) => c.name === context.cluster)?.cluster;
  if (!cluster?.server) throw fail(`cluster "${context.cluster}" is missing or has no server`);
  const user: KubeconfigUser = (context.user && doc.users?.find((u) => u.name === context.user)?.user) || {};

  const unsupported = user.exec
    ? 'user exec credential plugin'
    : user['auth-provider']
      ? 'user auth-provider'
      : user.username || user.password
        ? 'user basic auth'
        : cluster['proxy-url']
          ? 'cluster proxy-url'
          : undefined;
  if (unsupported) return { unsupported, source };

  const path = (p: string) => (isAbsolute(p) ? p : join(dir, p));
  // A file is read each time (rotation); inline data is decoded once.
  const material = (file: string | undefined, data: string | undefined): (() => Buffer) | undefined => {
    if (file) return () => readFileSync(path(file));
    if (!data) return undefined;
    const b = Buffer.from(data, 'base64');
    return () => b;
  };
  const ca = material(cluster['certificate-authority'], cluster['certificate-authority-data']);
  const cert = material(user['client-certificate'], user['client-certificate-data']);
  const key = material(user['client-key'], user['client-key-data']);
  if (!!cert !== !!key)
    throw fail(
      `user "${context.user}" has a client certificate without its key, or a key without its certificate`,
    );
  // Read each file once now, so a wrong path fails at start with its name.
  for (const [read, what] of [
    [ca, 'certificate-authority'],
    [cert, 'client-certificate'],
    [key, 'client-key'],
  ] as const) {
    try {
      read?.();
    } catch (err) {
      throw fail(`${what}: ${(err as Error).message}`);
    }
  }
  const tokenPath = user.tokenFile ?? user['token-file'];
  let token: (() => string) | undefined;
  if (user.token) {
    const t = user.token;
    token = () => t;
  } else if (tokenPath) {
    try {
      token = fileToken(path(tokenPath), now);
    } catch (err) {
      throw fail(`tokenFile: ${(err as Error).message}`);
    }
  }
  const impersonation: Record<string, string | string[]> = {
    ...(user.as ? { 'impersonate-user': user.as } : {}),
    ...(user['as-groups']?.length ? { 'impersonate-group': user['as-groups'] } : {}),
    ...(user['as-uid'] ? { 'impersonate-uid': user['as-uid'] } : {}),
  };
  const tlsServerName = cluster['tls-server-name'];
  return {
    server: cluster.server.replace(/\/$/, ''),
    tls: () => ({
      ...(ca ? { ca: ca() } : {}),
      ...(cert && key ? { cert: cert(), key: key() } : {}),
      rejectUnauthorized: cluster['insecure-skip-tls-verify'] !== true,
      ...(tlsServerName ? { servername: tlsServerName } : {}),
    }),
    headers: () => (token ? { ...impersonation, authorization: `Bearer ${token()}` } : impersonation),
    source,
  };
}

export const isUnsupported = (a: KubeAccess | UnsupportedAccess): a is UnsupportedAccess =>
  'unsupported' in a;
