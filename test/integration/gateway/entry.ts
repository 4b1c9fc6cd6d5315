/**
 * Test entrypoint: the gateway + run worker process exactly as main.ts builds it, but with a static
 * resolver read from APPHOST_TEST_APPS (JSON array of ResolvedApp) instead of the Kubernetes watches.
 * Prints `listening <port>` once serving.
 */
import { parseGatewayEnv } from '../../../src/gateway/config.ts';
import { serveGateway } from '../../../src/gateway/serve.ts';
import type { ResolvedApp } from '../../../src/shared/contracts/seams.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { onShutdownSignal } from '../../../src/shared/shutdown.ts';
import { staticResolver } from './helpers.ts';

const env = parseGatewayEnv(process.env);
const log = createLogger({ name: 'gateway-test-entry', level: env.APPHOST_LOG_LEVEL });
const apps = JSON.parse(process.env.APPHOST_TEST_APPS ?? '[]') as ResolvedApp[];
const proc = await serveGateway({ env, resolver: staticResolver(apps), log });
onShutdownSignal(log, proc.shutdownBoundMs, proc.shutdownSteps());
process.stdout.write(`listening ${proc.port()}\n`);
