/**
 * Which IP addresses a webhook may reach: the one list, kept against the IANA IPv4 and IPv6
 * Special-Purpose Address Registries (iana-ipv4-special-registry, iana-ipv6-special-registry), plus
 * multicast and the deprecated IPv6 blocks the registries no longer list.
 *
 * An address is judged by the most specific block that contains it, as the registries intend (e.g.
 * 2001::/23 is not globally reachable, but Teredo 2001::/32 inside it depends on the IPv4 addresses it
 * embeds). A block either refuses, allows, or embeds IPv4 addresses that must themselves be allowed:
 * NAT64 (64:ff9b::/96) reaches whatever IPv4 address it carries, so `64:ff9b::a9fe:a9fe` is the
 * metadata service 169.254.169.254 on a NAT64 network.
 */
import ipaddr from 'ipaddr.js';

export type Verdict =
  /** Not globally reachable (registry "False"), multicast, or deprecated: refused. */
  | 'refuse'
  | 'allow'
  /** Carries IPv4 addresses (`embedded()`); each must be allowed by the IPv4 rules. */
  | 'embeds-ipv4'
  /** IPv4-mapped IPv6 (::ffff:a.b.c.d): the socket connects to the IPv4 address itself. */
  | 'is-ipv4';

export interface SpecialBlock {
  cidr: string;
  name: string;
  /** Where the block is defined (RFC), as the registry cites it. */
  ref: string;
  verdict: Verdict;
  /** For `embeds-ipv4`: the IPv4 addresses this IPv6 address reaches. */
  embedded?: (parts: readonly number[]) => string[];
}

const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
const last32 = (p: readonly number[]) => [v4(p[6] ?? 0, p[7] ?? 0)];

/** IPv4: global unless listed. */
export const IPV4_BLOCKS: readonly SpecialBlock[] = [
  { cidr: '0.0.0.0/0', name: 'IPv4 unicast', ref: 'RFC 791', verdict: 'allow' },
  { cidr: '0.0.0.0/8', name: '"This network"', ref: 'RFC 791', verdict: 'refuse' },
  { cidr: '10.0.0.0/8', name: 'Private-Use', ref: 'RFC 1918', verdict: 'refuse' },
  { cidr: '100.64.0.0/10', name: 'Shared Address Space (CGNAT)', ref: 'RFC 6598', verdict: 'refuse' },
  { cidr: '127.0.0.0/8', name: 'Loopback', ref: 'RFC 1122', verdict: 'refuse' },
  {
    cidr: '169.254.0.0/16',
    name: 'Link Local (incl. 169.254.169.254 metadata)',
    ref: 'RFC 3927',
    verdict: 'refuse',
  },
  { cidr: '172.16.0.0/12', name: 'Private-Use', ref: 'RFC 1918', verdict: 'refuse' },
  // Its globally reachable anycast exceptions (192.0.0.9, 192.0.0.10) are no webhook receivers.
  { cidr: '192.0.0.0/24', name: 'IETF Protocol Assignments', ref: 'RFC 6890', verdict: 'refuse' },
  { cidr: '192.0.2.0/24', name: 'Documentation (TEST-NET-1)', ref: 'RFC 5737', verdict: 'refuse' },
  { cidr: '192.88.99.0/24', name: 'Deprecated 6to4 Relay Anycast', ref: 'RFC 7526', verdict: 'refuse' },
  { cidr: '192.168.0.0/16', name: 'Private-Use', ref: 'RFC 1918', verdict: 'refuse' },
  { cidr: '198.18.0.0/15', name: 'Benchmarking', ref: 'RFC 2544', verdict: 'refuse' },
  { cidr: '198.51.100.0/24', name: 'Documentation (TEST-NET-2)', ref: 'RFC 5737', verdict: 'refuse' },
  { cidr: '203.0.113.0/24', name: 'Documentation (TEST-NET-3)', ref: 'RFC 5737', verdict: 'refuse' },
  { cidr: '224.0.0.0/4', name: 'Multicast', ref: 'RFC 5771', verdict: 'refuse' },
  {
    cidr: '240.0.0.0/4',
    name: 'Reserved (incl. 255.255.255.255 broadcast)',
    ref: 'RFC 1112',
    verdict: 'refuse',
  },
];

/** IPv6: only global unicast (2000::/3) unless listed. */
export const IPV6_BLOCKS: readonly SpecialBlock[] = [
  { cidr: '::/0', name: 'not global unicast', ref: 'RFC 4291', verdict: 'refuse' },
  { cidr: '2000::/3', name: 'Global Unicast', ref: 'RFC 4291', verdict: 'allow' },
  { cidr: '::/128', name: 'Unspecified Address', ref: 'RFC 4291', verdict: 'refuse' },
  { cidr: '::1/128', name: 'Loopback Address', ref: 'RFC 4291', verdict: 'refuse' },
  { cidr: '::/96', name: 'IPv4-Compatible (deprecated)', ref: 'RFC 4291', verdict: 'refuse' },
  { cidr: '::ffff:0:0/96', name: 'IPv4-mapped Address', ref: 'RFC 4291', verdict: 'is-ipv4' },
  { cidr: '::ffff:0:0:0/96', name: 'IPv4-translated (SIIT)', ref: 'RFC 2765', verdict: 'refuse' },
  {
    cidr: '64:ff9b::/96',
    name: 'IPv4-IPv6 Translation (NAT64)',
    ref: 'RFC 6052',
    verdict: 'embeds-ipv4',
    embedded: last32,
  },
  { cidr: '64:ff9b:1::/48', name: 'IPv4-IPv6 Translation, local use', ref: 'RFC 8215', verdict: 'refuse' },
  { cidr: '100::/64', name: 'Discard-Only Address Block', ref: 'RFC 6666', verdict: 'refuse' },
  { cidr: '100:0:0:1::/64', name: 'Dummy IPv6 Prefix', ref: 'RFC 9780', verdict: 'refuse' },
  { cidr: '2001::/23', name: 'IETF Protocol Assignments', ref: 'RFC 2928', verdict: 'refuse' },
  {
    cidr: '2001::/32',
    name: 'TEREDO',
    ref: 'RFC 4380',
    verdict: 'embeds-ipv4',
    // Server address in bits 32-63, client address (bit-inverted) in the last 32 bits.
    embedded: (p) => [v4(p[2] ?? 0, p[3] ?? 0), v4(~(p[6] ?? 0) & 0xffff, ~(p[7] ?? 0) & 0xffff)],
  },
  { cidr: '2001:1::1/128', name: 'Port Control Protocol Anycast', ref: 'RFC 7723', verdict: 'allow' },
  { cidr: '2001:1::2/128', name: 'TURN Anycast', ref: 'RFC 8155', verdict: 'allow' },
  {
    cidr: '2001:1::3/128',
    name: 'DNS-SD Service Registration Protocol Anycast',
    ref: 'RFC 9665',
    verdict: 'allow',
  },
  { cidr: '2001:2::/48', name: 'Benchmarking', ref: 'RFC 5180', verdict: 'refuse' },
  { cidr: '2001:3::/32', name: 'AMT', ref: 'RFC 7450', verdict: 'allow' },
  { cidr: '2001:4:112::/48', name: 'AS112-v6', ref: 'RFC 7535', verdict: 'allow' },
  { cidr: '2001:10::/28', name: 'Deprecated (previously ORCHID)', ref: 'RFC 4843', verdict: 'refuse' },
  { cidr: '2001:20::/28', name: 'ORCHIDv2', ref: 'RFC 7343', verdict: 'allow' },
  { cidr: '2001:30::/28', name: 'Drone Remote ID Protocol Entity Tags', ref: 'RFC 9374', verdict: 'allow' },
  { cidr: '2001:db8::/32', name: 'Documentation', ref: 'RFC 3849', verdict: 'refuse' },
  {
    cidr: '2002::/16',
    name: '6to4',
    ref: 'RFC 3056',
    verdict: 'embeds-ipv4',
    embedded: (p) => [v4(p[1] ?? 0, p[2] ?? 0)],
  },
  { cidr: '2620:4f:8000::/48', name: 'Direct Delegation AS112 Service', ref: 'RFC 7534', verdict: 'allow' },
  { cidr: '3fff::/20', name: 'Documentation', ref: 'RFC 9637', verdict: 'refuse' },
  { cidr: '5f00::/16', name: 'Segment Routing (SRv6) SIDs', ref: 'RFC 9602', verdict: 'refuse' },
  {
    cidr: 'fc00::/7',
    name: 'Unique-Local (incl. fd00:ec2::254 metadata)',
    ref: 'RFC 4193',
    verdict: 'refuse',
  },
  { cidr: 'fe80::/10', name: 'Link-Local Unicast', ref: 'RFC 4291', verdict: 'refuse' },
  { cidr: 'fec0::/10', name: 'Site-Local (deprecated)', ref: 'RFC 3879', verdict: 'refuse' },
  { cidr: 'ff00::/8', name: 'Multicast', ref: 'RFC 4291', verdict: 'refuse' },
];

interface Compiled {
  block: SpecialBlock;
  range: ipaddr.IPv4 | ipaddr.IPv6;
  bits: number;
}

const compile = (blocks: readonly SpecialBlock[]): Compiled[] =>
  blocks.map((block) => {
    const [range, bits] = ipaddr.parseCIDR(block.cidr);
    return { block, range, bits };
  });
const V4 = compile(IPV4_BLOCKS);
const V6 = compile(IPV6_BLOCKS);

/** The most specific block containing `addr` (every address is in the /0 entry). */
export function blockOf(addr: ipaddr.IPv4 | ipaddr.IPv6): SpecialBlock {
  let best: Compiled | undefined;
  for (const c of addr.kind() === 'ipv4' ? V4 : V6) {
    if (c.range.kind() === addr.kind() && addr.match(c.range, c.bits) && (!best || c.bits > best.bits))
      best = c;
  }
  return (best as Compiled).block;
}

export type AddressDecision =
  | { allowed: true }
  | {
      allowed: false;
      /** Why, e.g. "Link Local (…) 169.254.0.0/16, RFC 3927", or "6to4 …, reaching 169.254.169.254 in …". */
      why: string;
    };

const describe = (b: SpecialBlock) => `${b.name} ${b.cidr}, ${b.ref}`;

/**
 * Whether a webhook may connect to `address` (an IP literal). `allowed(a)` is the operator's
 * allow-list; it opens the address as connected to (an IPv4-mapped address counts as its IPv4 form),
 * never the IPv4 address a translator (NAT64, 6to4, Teredo) would reach on its behalf.
 */
export function decideAddress(address: string, allowed: (ip: string) => boolean): AddressDecision {
  if (!ipaddr.isValid(address)) return { allowed: false, why: 'not an IP address' };
  let addr = ipaddr.parse(address);
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress())
    addr = (addr as ipaddr.IPv6).toIPv4Address();
  if (allowed(addr.toString())) return { allowed: true };
  const block = blockOf(addr);
  switch (block.verdict) {
    case 'allow':
    case 'is-ipv4': // unreachable: mapped addresses were converted above
      return { allowed: true };
    case 'refuse':
      return { allowed: false, why: describe(block) };
    case 'embeds-ipv4': {
      for (const ip of block.embedded?.((addr as ipaddr.IPv6).parts) ?? []) {
        const inner = blockOf(ipaddr.parse(ip));
        if (inner.verdict !== 'allow')
          return { allowed: false, why: `${describe(block)}, reaching ${ip} in ${describe(inner)}` };
      }
      return { allowed: true };
    }
  }
}
