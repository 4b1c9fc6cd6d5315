/**
 * A request whose Host is an assigned custom domain is routed to that app: `/<path>` on the domain
 * is `/v4/<project>/<app>/<path>`. Once the domain is unassigned the resolver forgets it and the
 * host falls through to the normal routes (where `/<path>` is a 404).
 */
import type { AppResolver } from '../../shared/contracts/seams.ts';
import type { GatewayContext } from '../context.ts';

type DomainContext = Pick<GatewayContext, 'hostname' | 'path' | 'state'>;

/**
 * Sets `ctx.state.target` when the Host is a custom domain; returns a promise only when the resolver
 * answers with one (the cluster's answers from its cache at once).
 */
export function customDomain(ctx: DomainContext, resolver: AppResolver): Promise<void> | undefined {
  const hostname = ctx.hostname.toLowerCase();
  if (!hostname) return undefined;
  const hit = resolver.resolveHost(hostname);
  if (hit instanceof Promise) return hit.then((h) => routeTo(ctx, h));
  routeTo(ctx, hit);
  return undefined;
}

function routeTo(ctx: DomainContext, hit: { projectId: string; appName: string } | undefined): void {
  if (!hit) return;
  ctx.state.viaDomain = true;
  ctx.state.target = {
    projectId: hit.projectId,
    appName: hit.appName,
    path: ctx.path.replace(/^\/+/, ''),
  };
}
