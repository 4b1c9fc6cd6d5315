import { existsSync } from 'node:fs';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../shared/log.ts';
import { startLocalNats } from './nats-server.ts';
import { findNatsServer } from './options.ts';
import { nodeSpawner } from './spawner.ts';

const binary = findNatsServer(process.env);

describe('startLocalNats (real nats-server)', () => {
  it.skipIf(!binary)(
    'starts JetStream on loopback, and stop() ends the process and removes its store',
    async () => {
      const lines: string[] = [];
      const nats = await startLocalNats({
        binary: binary!,
        spawner: nodeSpawner,
        log: silentLogger(),
        output: (l) => lines.push(l),
        verbose: true,
      });
      let storeDir: string | undefined;
      try {
        const nc = await connect({ servers: nats.url });
        const jsm = await jetstreamManager(nc);
        expect((await jsm.getAccountInfo()).streams).toBe(0);
        await nc.close();
        storeDir = lines.find((l) => l.includes('Store Directory'))?.match(/"(.+)\/jetstream"/)?.[1];
        expect(storeDir && existsSync(storeDir)).toBe(true);
        expect(lines.every((l) => l.startsWith('[nats] '))).toBe(true);
      } finally {
        await nats.stop();
      }
      expect(() => process.kill(nats.pid!, 0)).toThrow();
      expect(existsSync(storeDir!)).toBe(false);
    },
  );

  it('reports a binary that cannot run', async () => {
    await expect(
      startLocalNats({
        binary: '/nonexistent/nats-server',
        spawner: nodeSpawner,
        log: silentLogger(),
        output: () => {},
      }),
    ).rejects.toThrow(/exited before it was ready/);
  });
});
