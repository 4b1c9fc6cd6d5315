/**
 * The SSRF guard: a webhook endpoint may only be reached at a public address unless an operator opened
 * a range. The host is resolved once, every resolved address is checked, and the connection is then
 * pinned to the checked address (see `pinnedLookup`) so a second, rebinding DNS answer is never used.
 */
import { BlockList, isIP } from 'node:net';

/** Resolves a hostname to all its addresses (node:dns `lookup(host, { all: true })` in production). */
export type ResolveHost = (hostname: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;

/** Ranges refused by default: loopback, private, link-local, unique-local, CGNAT, metadata, multicast. */
export const DENIED_CIDRS: readonly string[] = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16', // link-local, includes the 169.254.169.254 metadata service
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, includes 255.255.255.255 broadcast
  '::/128',
  '::1/128',
  'fe80::/10',
  'fc00::/7', // unique-local, includes the fd00:ec2::254 metadata service
  'ff00::/8',
];

export interface ParsedCidr {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

/** Parses `a.b.c.d/n` or `x::y/n`; throws a readable error on anything else. */
export function parseCidr(raw: string): ParsedCidr {
  const text = raw.trim();
  const slash = text.lastIndexOf('/');
  const address = slash < 0 ? text : text.slice(0, slash);
  const kind = isIP(address);
  if (kind === 0) throw new Error(`"${raw}" is not a CIDR (address/prefix)`);
  const max = kind === 4 ? 32 : 128;
  const prefix = slash < 0 ? max : Number(text.slice(slash + 1));
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max)
    throw new Error(`"${raw}" has a prefix length outside 0..${max}`);
  return { address, prefix, family: kind === 4 ? 'ipv4' : 'ipv6' };
}

function blockListOf(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const c of cidrs) {
    const p = parseCidr(c);
    list.addSubnet(p.address, p.prefix, p.family);
  }
  return list;
}

export type GuardVerdict =
  | { ok: true; address: string; family: 4 | 6 }
  | { ok: false; reason: string; retryable: boolean };

export interface SsrfGuard {
  /** Decides whether `url` may be contacted and, if so, at which address. */
  check(url: URL): Promise<GuardVerdict>;
  /** Whether one address is allowed (allow-list first, then the default deny list). */
  allows(address: string): boolean;
}

/** `allowCidrs` opens ranges the deny list would refuse (local mode passes 127.0.0.0/8 and ::1/128). */
export function createSsrfGuard(opts: {
  allowCidrs: readonly string[];
  resolveHost: ResolveHost;
}): SsrfGuard {
  const denied = blockListOf(DENIED_CIDRS);
  const allowed = blockListOf(opts.allowCidrs);
  const allows = (address: string): boolean => {
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (allowed.check(address, family)) return true;
    return !denied.check(address, family);
  };
  return {
    allows,
    async check(url) {
      if (url.protocol !== 'http:' && url.protocol !== 'https:')
        return { ok: false, reason: `scheme ${url.protocol} is not allowed`, retryable: false };
      const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
      const literal = isIP(host);
      let addresses: Array<{ address: string; family: 4 | 6 }>;
      if (literal !== 0) {
        addresses = [{ address: host, family: literal === 4 ? 4 : 6 }];
      } else {
        try {
          addresses = await opts.resolveHost(host);
        } catch (err) {
          // A DNS failure is a network error in the retry table, not a policy refusal.
          return { ok: false, reason: `cannot resolve ${host}: ${errorText(err)}`, retryable: true };
        }
        if (addresses.length === 0)
          return { ok: false, reason: `${host} resolves to no address`, retryable: true };
      }
      const refused = addresses.find((a) => !allows(a.address));
      if (refused)
        return {
          ok: false,
          reason: `${host} resolves to ${refused.address}, a loopback, private, link-local or otherwise internal address that the webhook policy refuses`,
          retryable: false,
        };
      const first = addresses[0] as { address: string; family: 4 | 6 };
      return { ok: true, address: first.address, family: first.family };
    },
  };
}

/** A `net.connect` lookup that always answers with the one checked address (no second DNS query). */
export function pinnedLookup(address: string, family: 4 | 6) {
  return (
    _hostname: string,
    options: { all?: boolean },
    cb: (
      err: Error | null,
      address: string | Array<{ address: string; family: number }>,
      family?: number,
    ) => void,
  ): void => {
    if (options.all) cb(null, [{ address, family }]);
    else cb(null, address, family);
  };
}

export function errorText(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return typeof code === 'string' ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}

/** The system resolver (getaddrinfo), every address it returns. */
export const systemResolveHost: ResolveHost = async (hostname) => {
  const { lookup } = await import('node:dns/promises');
  const all = await lookup(hostname, { all: true, order: 'verbatim' });
  return all.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};
