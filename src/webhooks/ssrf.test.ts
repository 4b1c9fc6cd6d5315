import { describe, expect, it } from 'vitest';
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
