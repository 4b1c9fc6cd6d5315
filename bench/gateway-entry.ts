/**
 * The gateway as its own process for the benchmarks: built exactly as `apphost gateway` builds it
 * (`serveGateway`), with a static resolver read from APPHOST_BENCH_APPS (JSON array of ResolvedApp)
 * instead of the Kubernetes watches. Prints `listening <port> <pid>` once serving.
 */
import { parseGatewayEnv } from '../src/gateway/config.ts';
import { serveGateway } from '../src/gateway/serve.ts';
import type { AppResolver, ResolvedApp } from '../src/shared/contracts/seams.ts';
import { createLogger } from '../src/shared/log.ts';
import { onShutdownSignal } from '../src/shared/shutdown.ts';

const env = parseGatewayEnv(process.env);
const log = createLogger({ name: 'bench-gateway', level: env.APPHOST_LOG_LEVEL });
const apps = JSON.parse(process.env.APPHOST_BENCH_APPS ?? '[]') as ResolvedApp[];
const resolver: AppResolver = {
  resolve: async (projectId, appName) => apps.find((a) => a.projectId === projectId && a.appName === appName),
  resolveHost: async () => undefined,
};
const proc = await serveGateway({ env, resolver, log });
onShutdownSignal(log, proc.shutdownBoundMs, proc.shutdownSteps());
process.stdout.write(`listening ${proc.port()} ${process.pid}\n`);
