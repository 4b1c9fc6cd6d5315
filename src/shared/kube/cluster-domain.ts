/**
 * The cluster's DNS domain (`cluster.local` unless the cluster was set up otherwise): a setting when
 * given, else read from the pod's /etc/resolv.conf the way Knative does — the `search` entry that
 * starts with `svc.` (`svc.<domain>`) — else the default.
 */
export const DEFAULT_CLUSTER_DOMAIN = 'cluster.local';

/** The domain named by a resolv.conf's search list, if any (pure). */
export function clusterDomainFromResolvConf(text: string): string | undefined {
  for (const line of text.split('\n')) {
    const [keyword, ...entries] = line.trim().split(/\s+/);
    if (keyword !== 'search') continue;
    for (const e of entries) {
      if (e.startsWith('svc.') && e.length > 4) return e.slice(4).replace(/\.$/, '');
    }
  }
  return undefined;
}

/** The setting, else the pod's resolv.conf (read through `readResolvConf`), else the default. */
export function clusterDomain(setting: string | undefined, readResolvConf: () => string | undefined): string {
  if (setting) return setting;
  const text = readResolvConf();
  return (text && clusterDomainFromResolvConf(text)) || DEFAULT_CLUSTER_DOMAIN;
}
