import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { blockOf, IPV4_BLOCKS, IPV6_BLOCKS } from './special-addresses.ts';
import { createSsrfGuard, parseCidr, type ResolveHost } from './ssrf.ts';

const resolveTo =
  (...addresses: string[]): ResolveHost =>
  async () =>
    addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }) as const);

describe('ssrf guard, default policy', () => {
  const guard = createSsrfGuard({ allowCidrs: [], resolveHost: resolveTo('93.184.216.34') });
  it.each([
    '127.0.0.1',
    '127.255.0.9',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fe80::1',
    'fc00::1',
    'fd00:ec2::254',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:a9fe:a9fe',
    '::ffff:10.0.0.1',
  ])('refuses %s', (address) => {
    expect(guard.allows(address)).toBe(false);
  });
  it.each(['93.184.216.34', '8.8.8.8', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8'])(
    'allows %s',
    (a) => {
      expect(guard.allows(a)).toBe(true);
    },
  );

  it('checks literal hosts, including bracketed IPv6', async () => {
    expect((await guard.check(new URL('http://127.0.0.1:8080/x'))).ok).toBe(false);
    expect((await guard.check(new URL('http://[::1]/x'))).ok).toBe(false);
    expect(await guard.check(new URL('https://8.8.8.8/x'))).toEqual({
      ok: true,
      address: '8.8.8.8',
      family: 4,
    });
  });

  it('refuses a name when any resolved address is internal, permanently', async () => {
    const g = createSsrfGuard({ allowCidrs: [], resolveHost: resolveTo('8.8.8.8', '10.0.0.5') });
    const v = await g.check(new URL('https://rebind.example/hook'));
    expect(v).toMatchObject({ ok: false, retryable: false });
    if (!v.ok) expect(v.reason).toContain('10.0.0.5');
  });

  it('treats a DNS failure as retryable', async () => {
    const g = createSsrfGuard({
      allowCidrs: [],
      resolveHost: async () => {
        throw Object.assign(new Error('getaddrinfo ENOTFOUND nope.invalid'), { code: 'ENOTFOUND' });
      },
    });
    expect(await g.check(new URL('https://nope.invalid/'))).toMatchObject({ ok: false, retryable: true });
  });

  it('refuses non-http schemes', async () => {
    expect(await guard.check(new URL('ftp://8.8.8.8/'))).toMatchObject({ ok: false, retryable: false });
  });
});

describe('ssrf guard, IPv6 forms that embed, translate to or are special-purpose addresses', () => {
  const guard = createSsrfGuard({ allowCidrs: [], resolveHost: resolveTo() });
  it.each([
    ['64:ff9b::a9fe:a9fe', 'NAT64 of 169.254.169.254'],
    ['64:ff9b::169.254.169.254', 'NAT64 of 169.254.169.254, dotted'],
    ['64:ff9b::7f00:1', 'NAT64 of 127.0.0.1'],
    ['64:ff9b::a00:1', 'NAT64 of 10.0.0.1'],
    ['64:ff9b:1::808:808', 'local-use NAT64, RFC 8215'],
    ['::ffff:0:a9fe:a9fe', 'SIIT IPv4-translated'],
    ['::a9fe:a9fe', 'IPv4-compatible'],
    ['::808:808', 'IPv4-compatible, even of a public address'],
    ['2002:a9fe:a9fe::1', '6to4 of 169.254.169.254'],
    ['2002:7f00:1::', '6to4 of 127.0.0.1'],
    ['2001:0:4136:e378:8000:63bf:f5ff:fffe', 'Teredo, client 10.0.0.1'],
    ['2001:0:a00:1:8000:63bf:f7f7:f7f7', 'Teredo, server 10.0.0.1'],
    ['100::1', 'discard-only'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation, RFC 9637'],
    ['fec0::1', 'site-local'],
    ['2001:2::1', 'benchmarking'],
    ['4000::1', 'outside global unicast'],
  ])('refuses %s (%s)', (address) => {
    expect(guard.allows(address)).toBe(false);
  });

  it.each([
    ['64:ff9b::808:808', 'NAT64 of 8.8.8.8: the path IPv6-only clusters use to reach IPv4 receivers'],
    ['2002:808:808::1', '6to4 of 8.8.8.8'],
    ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', 'Teredo, server 65.54.227.120, client 8.8.8.8'],
    ['2001:4860:4860::8888', 'ordinary global unicast'],
  ])('allows %s (%s)', (address) => {
    expect(guard.allows(address)).toBe(true);
  });

  it('refuses an embedding form literally and when a DNS name resolves to it, naming the IPv4 address', async () => {
    const literal = await guard.check(new URL('http://[64:ff9b::a9fe:a9fe]/latest/meta-data/'));
    expect(literal).toMatchObject({ ok: false, retryable: false });
    if (!literal.ok) expect(literal.reason).toMatch(/169\.254\.169\.254.*Link Local/);
    const viaDns = createSsrfGuard({ allowCidrs: [], resolveHost: resolveTo('2002:a9fe:a9fe::1') });
    const named = await viaDns.check(new URL('https://innocent.example/hook'));
    expect(named).toMatchObject({ ok: false, retryable: false });
    if (!named.ok) expect(named.reason).toContain('6to4');
  });

  it('in local mode (loopback allowed) still refuses translated forms of loopback and metadata', () => {
    const local = createSsrfGuard({ allowCidrs: ['127.0.0.0/8', '::1/128'], resolveHost: resolveTo() });
    expect(local.allows('::ffff:127.0.0.1')).toBe(true); // the same socket as 127.0.0.1
    expect(local.allows('64:ff9b::7f00:1')).toBe(false);
    expect(local.allows('2002:7f00:1::1')).toBe(false);
    expect(local.allows('64:ff9b::a9fe:a9fe')).toBe(false);
    expect(local.allows('::7f00:1')).toBe(false);
  });
});

describe('the special-purpose address table', () => {
  it.each([...IPV4_BLOCKS, ...IPV6_BLOCKS].map((b) => [b.cidr, b]))('%s parses, once', (cidr, b) => {
    expect(() => parseCidr(cidr)).not.toThrow();
    expect([...IPV4_BLOCKS, ...IPV6_BLOCKS].filter((o) => o.cidr === cidr)).toHaveLength(1);
    if (b.verdict === 'embeds-ipv4') expect(b.embedded).toBeTypeOf('function');
  });
  it('judges by the most specific block', () => {
    expect(blockOf(ipaddr.parse('2001:1::1')).verdict).toBe('allow'); // inside the refused 2001::/23
    expect(blockOf(ipaddr.parse('2001:1::5')).verdict).toBe('refuse');
    expect(blockOf(ipaddr.parse('2001::1')).name).toBe('TEREDO');
  });
});

describe('ssrf guard, allow-list', () => {
  it('opens only the listed ranges', () => {
    const g = createSsrfGuard({ allowCidrs: ['127.0.0.0/8', '::1/128'], resolveHost: resolveTo() });
    expect(g.allows('127.0.0.1')).toBe(true);
    expect(g.allows('::1')).toBe(true);
    expect(g.allows('10.0.0.1')).toBe(false);
    expect(g.allows('169.254.169.254')).toBe(false);
  });
  it('rejects malformed CIDRs', () => {
    expect(() => parseCidr('10.0.0.0/33')).toThrow(/prefix/);
    expect(() => parseCidr('banana/8')).toThrow(/CIDR/);
    expect(parseCidr('10.0.0.1')).toEqual({ address: '10.0.0.1', prefix: 32, family: 'ipv4' });
  });
});
