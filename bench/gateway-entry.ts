/**
 * The gateway as its own process for the benchmarks: built exactly as `apphost gateway` builds it
 * (`serveGateway`), with a static resolver read from APPHOST_BENCH_APPS (JSON array of ResolvedApp)
 * instead of the Kubernetes watches; APPHOST_GATEWAY_PROCESSES as in main.ts. Prints `listening <port> <pid>`
 * once serving (with several processes: the primary, once every process listens).
 */

import { setSourceMapsSupport } from 'node:module';
import { availableParallelism } from 'node:os';
import { parseGatewayEnv } from '../src/gateway/config.ts';
import { gatewayProcessCount, PROCESS_INDEX_ENV, runGateway } from '../src/gateway/processes.ts';
import type { AppCall, AppCaller, AppResolver, ResolvedApp } from '../src/shared/contracts/seams.ts';
import { createLogger } from '../src/shared/log.ts';
import { onShutdownSignal } from '../src/shared/shutdown.ts';
import { releaseStartupHeap } from '../src/shared/startup-heap.ts';

// As src/cli/main.ts: with source maps on (the chart's NODE_OPTIONS), only our own code's are loaded.
if (process.sourceMapsEnabled) setSourceMapsSupport(true, { nodeModules: false });

const env = parseGatewayEnv(process.env);
const log = createLogger({ name: 'bench-gateway', level: env.APPHOST_LOG_LEVEL });
const apps = JSON.parse(process.env.APPHOST_BENCH_APPS ?? '[]') as ResolvedApp[];
// Answers at once, as the cluster's resolver does from its informer caches.
const resolver: AppResolver = {
  resolve: (projectId, appName) => apps.find((a) => a.projectId === projectId && a.appName === appName),
  resolveHost: () => undefined,
  // The app table of native mode's data plane (its snapshot); the apps never change here.
  watchApps: (sink) => {
    for (const a of apps) sink.setApp(a);
    return () => {};
  },
};
// APPHOST_BENCH_LIMITER=off: calls go straight to the app's upstream, the balancer bypassed (the
// baseline of the limiter's cost). Imported in the serving process only: a primary loads no undici.
async function directCaller(): Promise<AppCaller> {
  const [{ Agent }, { dispatchUpstream }] = await Promise.all([
    import('../src/shared/http/undici-agent.ts'),
    import('../src/shared/http/upstream-dispatch.ts'),
  ]);
  const direct = new Agent({ keepAliveTimeout: 30_000 });
  const call = (app: ResolvedApp, c: AppCall) =>
    dispatchUpstream({ ...c, dispatcher: direct, upstream: app.upstream });
  return Object.assign(call, {
    reserve: async (app: ResolvedApp) => ({ call: (c: AppCall) => call(app, c), release: () => {} }),
  });
}
// APPHOST_GATEWAY_PROCESSES as in main.ts (`auto`: this machine's CPUs).
const run = await runGateway({
  env,
  log,
  processes: gatewayProcessCount(env.APPHOST_GATEWAY_PROCESSES, availableParallelism()),
  processIndex: process.env[PROCESS_INDEX_ENV],
  // Imported here, as main.ts does, so a primary does not load the gateway.
  serve: async ({ ops }) => {
    const { serveGateway } = await import('../src/gateway/serve.ts');
    const callApp = process.env.APPHOST_BENCH_LIMITER === 'off' ? await directCaller() : undefined;
    return { proc: await serveGateway({ env, resolver, log, ops, ...(callApp ? { callApp } : {}) }) };
  },
  onPrimaryGone: () => process.kill(process.pid, 'SIGTERM'),
});
onShutdownSignal(log, run.shutdownBoundMs, run.shutdownSteps, run.signals);
// As main.ts: the start-up heap given back (with the chart's --expose-gc) before `listening` is printed.
releaseStartupHeap(globalThis.gc);
if (run.role !== 'process') {
  await run.started();
  // The pid is the primary's with several processes: the benchmark adds up its children's CPU.
  process.stdout.write(`listening ${run.port()} ${process.pid}\n`);
}
