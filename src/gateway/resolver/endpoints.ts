/**
 * An app's ready replicas from its Service's EndpointSlices: the gateway sends calls straight to pod
 * IPs, so it needs neither cluster DNS nor the node's Service rules, and a pod leaves the routing
 * table the moment Kubernetes marks it terminating (its endpoint turns not-ready).
 */
import type { V1EndpointSlice } from '@kubernetes/client-node';
import type { Replica } from '../balancer/pool.ts';

/** The label the EndpointSlice controller sets to the Service's name. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

/** `http://ip:port`, with brackets for IPv6. */
export function replicaUrl(address: string, port: number): string {
  return address.includes(':') ? `http://[${address}]:${port}` : `http://${address}:${port}`;
}

/**
 * The ready replicas of one Service from all its slices (deduplicated, in a stable order). Only
 * endpoints whose `ready` condition is true count: terminating pods are not ready.
 */
export function replicasFromSlices(
  slices: Iterable<Pick<V1EndpointSlice, 'addressType' | 'endpoints' | 'ports'>>,
  portName: string,
): Replica[] {
  const out = new Map<string, Replica>();
  for (const slice of slices) {
    if (slice.addressType !== 'IPv4' && slice.addressType !== 'IPv6') continue;
    const ports = slice.ports ?? [];
    const port = (ports.find((p) => p.name === portName) ?? (ports.length === 1 ? ports[0] : undefined))
      ?.port;
    if (port === undefined) continue;
    for (const ep of slice.endpoints ?? []) {
      // `ready` unset means unknown: treat as ready (the API's documented interpretation).
      if (ep.conditions?.ready === false) continue;
      for (const address of ep.addresses ?? []) {
        const id = slice.addressType === 'IPv6' ? `[${address}]:${port}` : `${address}:${port}`;
        out.set(id, { id, url: replicaUrl(address, port) });
      }
    }
  }
  return [...out.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
