/** What the gateway learns about a request, in order. */
import type { ResolvedApp } from '../shared/contracts/seams.ts';
import type { EdgeState } from '../shared/http/request-id.ts';
import type { CallContext } from './call-context.ts';
import type { RunMode } from './metrics.ts';

export interface RunTarget {
  projectId: string;
  appName: string;
  /** Path after `/v4/<project>/<app>/`, no leading slash. */
  path: string;
}

export interface GatewayState extends EdgeState {
  mode?: RunMode;
  target?: RunTarget;
  app?: ResolvedApp;
  /** True when the request came in on a custom domain. */
  viaDomain?: boolean;
  /** Host of the call's webhookEndpoint, when it has one (for the sync-call record). */
  webhookHost?: string;
  /** A handed-off call's queue deadline (epoch ms), kept from the data plane's queue (AppCall.deadline). */
  queueDeadline?: number;
}

export type GatewayContext = CallContext;
