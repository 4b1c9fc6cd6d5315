import type { Runtime } from '../../apis/v1alpha1/types.ts';

/** Where an app is served. Kubernetes: the App's Service; local mode: a runtime process on loopback. */
export interface ResolvedApp {
  projectId: string;
  appName: string;
  runtime: Runtime;
  /** Base URL of the app's server, without a trailing slash, e.g. http://hello.proj.svc:8080 */
  upstream: string;
  ready: boolean;
  gracePeriodSeconds: number;
  /** Cortex functions the app exports, when known (undefined = unknown, do not pre-check). */
  functions?: readonly string[];
}

export interface AppResolver {
  resolve(projectId: string, appName: string): Promise<ResolvedApp | undefined>;
  /** The app a custom domain's Host header is assigned to, if any. */
  resolveHost(hostname: string): Promise<{ projectId: string; appName: string } | undefined>;
}
