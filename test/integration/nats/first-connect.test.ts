/**
 * A piece started before any NATS server listens (right after `helm install`, issue 21.3) keeps trying
 * the first connection within its bound instead of exiting, and connects once a server is up.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { silentLogger } from '../../../src/shared/log.ts';
import { connectNats } from '../../../src/shared/nats/connect.ts';
import { type NatsServer, startNats } from '../../harness/nats.ts';

let nats: NatsServer;

beforeAll(async () => {
  nats = await startNats();
  await nats.stop({ keepStore: true });
});

afterAll(async () => {
  await nats?.stop();
});

it('fails with the bound named once it passes and no server listened', async () => {
  await expect(
    connectNats({
      url: nats.url,
      name: 'first-connect-test',
      timeoutMs: 500,
      waitOnFirstConnect: true,
      firstConnectBoundMs: 1_500,
      log: silentLogger(),
    }),
  ).rejects.toThrow(`NATS (${nats.url}) not reachable within 1500 ms`);
});

it('connects once the server comes up after the piece started', async () => {
  let settled = false;
  const pending = connectNats({
    url: nats.url,
    name: 'first-connect-test',
    timeoutMs: 1_000,
    waitOnFirstConnect: true,
    firstConnectBoundMs: 60_000,
    log: silentLogger(),
  }).finally(() => {
    settled = true;
  });
  // Still trying (neither connected nor failed) while nothing listens.
  await new Promise((r) => setTimeout(r, 2_500));
  expect(settled).toBe(false);
  await nats.restart();
  const handle = await pending;
  try {
    expect(handle.connected()).toBe(true);
    await handle.nc.flush();
  } finally {
    await handle.nc.close();
  }
});
