/**
 * The gateway as its own process for the benchmarks: built exactly as `apphost gateway` builds it
 * (`serveGateway`), with a static resolver read from APPHOST_BENCH_APPS (JSON array of ResolvedApp)
 * instead of the Kubernetes watches. Prints `listening <port> <pid>` once serving.
 */

import { Agent } from 'undici';
import { parseGatewayEnv } from '../src/gateway/config.ts';
import { serveGateway } from '../src/gateway/serve.ts';
import type { AppCall, AppCaller, AppResolver, ResolvedApp } from '../src/shared/contracts/seams.ts';
import { callUpstream } from '../src/shared/http/upstream.ts';
import { createLogger } from '../src/shared/log.ts';
import { onShutdownSignal } from '../src/shared/shutdown.ts';

const env = parseGatewayEnv(process.env);
const log = createLogger({ name: 'bench-gateway', level: env.APPHOST_LOG_LEVEL });
const apps = JSON.parse(process.env.APPHOST_BENCH_APPS ?? '[]') as ResolvedApp[];
const resolver: AppResolver = {
  resolve: async (projectId, appName) => apps.find((a) => a.projectId === projectId && a.appName === appName),
  resolveHost: async () => undefined,
};
// APPHOST_BENCH_LIMITER=off: calls go straight to the app's upstream, the balancer bypassed (the
// baseline of the limiter's cost).
const direct = new Agent({ keepAliveTimeout: 30_000 });
const callApp: AppCaller | undefined =
  process.env.APPHOST_BENCH_LIMITER === 'off'
    ? Object.assign(
        (app: ResolvedApp, call: AppCall) =>
          callUpstream({ ...call, dispatcher: direct, upstream: app.upstream }),
        {
          reserve: async (app: ResolvedApp) => ({
            call: (call: AppCall) => callUpstream({ ...call, dispatcher: direct, upstream: app.upstream }),
            release: () => {},
          }),
        },
      )
    : undefined;
const proc = await serveGateway({ env, resolver, log, ...(callApp ? { callApp } : {}) });
onShutdownSignal(log, proc.shutdownBoundMs, proc.shutdownSteps());
process.stdout.write(`listening ${proc.port()} ${process.pid}\n`);
