/**
 * Test entrypoint: the gateway + run worker process exactly as main.ts builds it, but with a static
 * resolver read from APPHOST_TEST_APPS (JSON array of ResolvedApp) and APPHOST_TEST_HOSTS (JSON object:
 * custom domain → {projectId, appName}) instead of the Kubernetes watches;
 * APPHOST_GATEWAY_PROCESSES as in main.ts. Prints `listening <port>` once serving (with several
 * processes: once every process has listened).
 */
import { connect } from 'node:net';
import { parseGatewayEnv } from '../../../src/gateway/config.ts';
import { gatewayProcessCount, PROCESS_INDEX_ENV, runGateway } from '../../../src/gateway/processes.ts';
import { serveGateway } from '../../../src/gateway/serve.ts';
import type { ResolvedApp } from '../../../src/shared/contracts/seams.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { onShutdownSignal } from '../../../src/shared/shutdown.ts';
import { releaseStartupHeap } from '../../../src/shared/startup-heap.ts';
import { waitFor } from '../../harness/process.ts';
import { buildDataPlane } from './dataplane-binary.ts';
import { staticResolver, tempDir } from './helpers.ts';

/** Bound on the data plane listening after the gateway started (native mode). */
const NATIVE_READY_TIMEOUT_MS = 20_000;

const accepts = (host: string, port: number | undefined) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port ?? 0, host === '0.0.0.0' ? '127.0.0.1' : host);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });

// APPHOST_TEST_DATA_PLANE=native (design §7): the gateway in native mode, the data plane built from this
// tree, when the suite runs one process (v1 refuses native with several: those suites stay on node).
const nativeTest =
  process.env.APPHOST_TEST_DATA_PLANE === 'native' &&
  process.env.APPHOST_GATEWAY_DATA_PLANE === undefined &&
  (process.env.APPHOST_GATEWAY_PROCESSES ?? '1') === '1';
const env = parseGatewayEnv(
  nativeTest
    ? {
        ...process.env,
        APPHOST_GATEWAY_DATA_PLANE: 'native',
        APPHOST_GATEWAY_DATA_PLANE_BIN: buildDataPlane(),
        APPHOST_GATEWAY_DATA_PLANE_DIR: tempDir('apphost-entry-dp-'),
      }
    : process.env,
);
const log = createLogger({ name: 'gateway-test-entry', level: env.APPHOST_LOG_LEVEL });
const apps = JSON.parse(process.env.APPHOST_TEST_APPS ?? '[]') as ResolvedApp[];
const hosts = JSON.parse(process.env.APPHOST_TEST_HOSTS ?? '{}') as Record<
  string,
  { projectId: string; appName: string }
>;
const run = await runGateway({
  env,
  log,
  processes: gatewayProcessCount(env.APPHOST_GATEWAY_PROCESSES, 2),
  processIndex: process.env[PROCESS_INDEX_ENV],
  serve: async ({ ops }) => ({
    proc: await serveGateway({ env, resolver: staticResolver(apps, hosts), log, ops }),
  }),
  onPrimaryGone: () => process.kill(process.pid, 'SIGTERM'),
});
onShutdownSignal(log, run.shutdownBoundMs, run.shutdownSteps, run.signals);
releaseStartupHeap(globalThis.gc);
if (run.role !== 'process') {
  await run.started();
  // The data plane binds the port once it has its config and state: a caller told the port can call.
  if (env.APPHOST_GATEWAY_DATA_PLANE === 'native')
    await waitFor(
      'the data plane on its port',
      () => accepts(env.APPHOST_GATEWAY_HOST, run.port()),
      NATIVE_READY_TIMEOUT_MS,
      20,
    );
  process.stdout.write(`listening ${run.port()}\n`);
}
