/**
 * The SSRF guard: a webhook endpoint may only be reached at a public address unless an operator opened
 * a range. The host is resolved once, every resolved address is checked, and the connection is then
 * pinned to the checked address (see `pinnedLookup`) so a second, rebinding DNS answer is never used.
 */
import { BlockList, isIP } from 'node:net';
import { type AddressDecision, decideAddress } from './special-addresses.ts';

/** Resolves a hostname to all its addresses (node:dns `lookup(host, { all: true })` in production). */
export type ResolveHost = (hostname: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;

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
  /** Whether one address is allowed (allow-list first, then the special-purpose address rules). */
  allows(address: string): boolean;
}

/** Addresses whose decision the guard remembers at most. */
export const DECISIONS_KEPT = 4_096;

/**
 * Addresses are judged by `decideAddress` (special-addresses.ts); `allowCidrs` opens ranges it would
 * refuse (local mode passes 127.0.0.0/8 and ::1/128).
 */
export function createSsrfGuard(opts: {
  allowCidrs: readonly string[];
  resolveHost: ResolveHost;
}): SsrfGuard {
  const allowed = blockListOf(opts.allowCidrs);
  const inAllowList = (ip: string) => allowed.check(ip, isIP(ip) === 6 ? 'ipv6' : 'ipv4');
  // The decision is a pure function of the address: remembered for the addresses seen (a receiver's
  // address comes back with every delivery to it), forgotten all at once past DECISIONS_KEPT.
  const decisions = new Map<string, AddressDecision>();
  const decide = (address: string): AddressDecision => {
    let d = decisions.get(address);
    if (d === undefined) {
      if (decisions.size >= DECISIONS_KEPT) decisions.clear();
      d = decideAddress(address, inAllowList);
      decisions.set(address, d);
    }
    return d;
  };
  const allows = (address: string): boolean => decide(address).allowed;
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
      for (const a of addresses) {
        const d = decide(a.address);
        if (d.allowed) continue;
        return {
          ok: false,
          reason: `${host} resolves to ${a.address} (${d.why}): an internal or special-purpose address that the webhook policy refuses`,
          retryable: false,
        };
      }
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
