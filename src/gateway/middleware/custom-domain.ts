/**
 * A request whose Host is an assigned custom domain is routed to that app: `/<path>` on the domain
 * is `/v4/<project>/<app>/<path>`. Once the domain is unassigned the resolver forgets it and the
 * host falls through to the normal routes (where `/<path>` is a 404).
 */
import type { AppResolver } from '../../shared/contracts/seams.ts';
import type { GatewayContext } from '../context.ts';

/** Sets `ctx.state.target` when the Host is a custom domain. */
export async function customDomain(
  ctx: Pick<GatewayContext, 'hostname' | 'path' | 'state'>,
  resolver: AppResolver,
): Promise<void> {
  const hostname = ctx.hostname.toLowerCase();
  const hit = hostname ? await resolver.resolveHost(hostname) : undefined;
  if (hit) {
    ctx.state.viaDomain = true;
    ctx.state.target = {
      projectId: hit.projectId,
      appName: hit.appName,
      path: ctx.path.replace(/^\/+/, ''),
    };
  }
}
