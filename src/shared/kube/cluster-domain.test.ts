import { describe, expect, it } from 'vitest';
import { clusterDomain, clusterDomainFromResolvConf } from './cluster-domain.ts';

describe('clusterDomainFromResolvConf', () => {
  it.each([
    [
      'a pod in a cluster.local cluster',
      'search shop.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\n',
      'cluster.local',
    ],
    [
      'another domain, trailing dot',
      'nameserver 10.0.0.10\nsearch ns.svc.k8s.example.com. svc.k8s.example.com. k8s.example.com.\n',
      'k8s.example.com',
    ],
    ['not in a cluster', 'nameserver 1.1.1.1\nsearch example.org\n', undefined],
    ['empty', '', undefined],
  ])('%s', (_name, text, want) => {
    expect(clusterDomainFromResolvConf(text)).toBe(want);
  });
});

describe('clusterDomain', () => {
  it('prefers the setting, then resolv.conf, then cluster.local', () => {
    const conf = () => 'search svc.corp.internal\n';
    expect(clusterDomain('set.example', conf)).toBe('set.example');
    expect(clusterDomain(undefined, conf)).toBe('corp.internal');
    expect(clusterDomain(undefined, () => undefined)).toBe('cluster.local');
  });
});
