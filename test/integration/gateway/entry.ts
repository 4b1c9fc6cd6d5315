/**
 * Test entrypoint: the gateway + run worker process exactly as main.ts builds it, but with a static
 * resolver read from APPHOST_TEST_APPS (JSON array of ResolvedApp) instead of the Kubernetes watches;
 * APPHOST_GATEWAY_PROCESSES as in main.ts. Prints `listening <port>` once serving (with several
 * processes: once every process has listened).
 */
import { parseGatewayEnv } from '../../../src/gateway/config.ts';
import { gatewayProcessCount, PROCESS_INDEX_ENV, runGateway } from '../../../src/gateway/processes.ts';
import { serveGateway } from '../../../src/gateway/serve.ts';
import type { ResolvedApp } from '../../../src/shared/contracts/seams.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { onShutdownSignal } from '../../../src/shared/shutdown.ts';
import { staticResolver } from './helpers.ts';

const env = parseGatewayEnv(process.env);
const log = createLogger({ name: 'gateway-test-entry', level: env.APPHOST_LOG_LEVEL });
const apps = JSON.parse(process.env.APPHOST_TEST_APPS ?? '[]') as ResolvedApp[];
const run = await runGateway({
  env,
  log,
  processes: gatewayProcessCount(env.APPHOST_GATEWAY_PROCESSES, 2),
  processIndex: process.env[PROCESS_INDEX_ENV],
  serve: async ({ ops }) => ({ proc: await serveGateway({ env, resolver: staticResolver(apps), log, ops }) }),
  onPrimaryGone: () => process.kill(process.pid, 'SIGTERM'),
});
onShutdownSignal(log, run.shutdownBoundMs, run.shutdownSteps, run.signals);
if (run.role !== 'process') {
  await run.started();
  process.stdout.write(`listening ${run.port()}\n`);
}
