/**
 * Issue 21.4: no piece may be killed by the kubelet inside its own shutdown bound. For every Deployment
 * the chart renders (defaults and changed values), terminationGracePeriodSeconds must cover the preStop
 * wait plus the bound the process computes from its environment with its own formula.
 */
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { gatewayShutdownBoundMs, parseGatewayEnv } from '../../../src/gateway/config.ts';
import { readWebhooksEnv, webhooksShutdownBoundMs } from '../../../src/webhooks/settings.ts';
import { CHART, run } from './helpers.ts';

interface Container {
  env?: { name: string; value?: string }[];
  lifecycle?: { preStop?: { sleep?: { seconds: number } } };
}

function boundMs(piece: string, env: Record<string, string>): number {
  const required = { APPHOST_PLATFORM_KEY: 'x'.repeat(32), APPHOST_RUN_TOKEN_KEYS_FILE: '/keys.json' };
  switch (piece) {
    case 'gateway':
      return gatewayShutdownBoundMs(parseGatewayEnv({ ...required, ...env }));
    case 'webhooks':
      return webhooksShutdownBoundMs(readWebhooksEnv({ ...required, ...env }));
    case 'management':
      return Number(env.APPHOST_MANAGEMENT_SHUTDOWN_TIMEOUT_MS);
    case 'operator':
      return Number(env.APPHOST_OPERATOR_SHUTDOWN_TIMEOUT_MS);
    default:
      throw new Error(`unknown piece ${piece}`);
  }
}

async function check(set: string[]): Promise<void> {
  const r = await run('helm', ['template', 'x', CHART, ...set.flatMap((s) => ['--set', s])]);
  expect(r.code, r.stderr).toBe(0);
  const deployments = parseAllDocuments(r.stdout)
    .map((d) => d.toJS())
    .filter((o) => o?.kind === 'Deployment');
  expect(deployments).toHaveLength(4);
  for (const d of deployments) {
    const piece = d.metadata.labels['app.kubernetes.io/component'] as string;
    const c = d.spec.template.spec.containers[0] as Container;
    const env = Object.fromEntries(
      (c.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]),
    );
    const preStopMs = (c.lifecycle?.preStop?.sleep?.seconds ?? 0) * 1000;
    const graceMs = d.spec.template.spec.terminationGracePeriodSeconds * 1000;
    expect(graceMs, `${piece}: grace ${graceMs} ms < preStop ${preStopMs} + bound`).toBeGreaterThan(
      preStopMs + boundMs(piece, env as Record<string, string>),
    );
  }
}

describe('shutdown bounds in the chart', () => {
  it('give every piece a grace period longer than its preStop plus its own SIGTERM bound', async () => {
    await check([]);
  });

  it('still do with changed bounds', async () => {
    await check([
      'gateway.shutdown.drainSeconds=120',
      'gateway.preStopSeconds=20',
      'webhooks.shutdown.stopSeconds=90',
      'management.shutdown.timeoutSeconds=40',
      'operator.shutdown.timeoutSeconds=45',
    ]);
  });

  it('derives the grace even where an older values file still sets one', async () => {
    await check(['gateway.terminationGracePeriodSeconds=10', 'management.terminationGracePeriodSeconds=1']);
  });
});
