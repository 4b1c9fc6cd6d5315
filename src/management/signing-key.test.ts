import { decodeProtectedHeader } from 'jose';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../shared/log.ts';
import { generateSigningKey, type KeySet } from '../shared/run-tokens.ts';
import { createManagementApi } from './app.ts';
import { createServiceAccount } from './service-accounts.ts';
import { activeKeySet } from './signing-key.ts';
import { createMemoryStore } from './store/memory.ts';

const T0 = Date.parse('2027-01-01T00:00:00Z');
const MIN = 60_000;

describe('activeKeySet', () => {
  it('signs with a rotated key only once it is old enough to have reached the gateway', async () => {
    const old = await generateSigningKey(new Date(T0));
    const fresh = await generateSigningKey(new Date(T0 + 10 * MIN));
    const set: KeySet = { keys: [fresh, old] };
    expect(activeKeySet(set, T0 + 11 * MIN, 2 * MIN).keys.map((k) => k.kid)).toEqual([old.kid, fresh.kid]);
    expect(activeKeySet(set, T0 + 12 * MIN, 2 * MIN)).toBe(set);
  });

  it('a fresh install (only new keys) signs with the newest at once', async () => {
    const only = await generateSigningKey(new Date(T0));
    const set: KeySet = { keys: [only] };
    expect(activeKeySet(set, T0, 2 * MIN)).toBe(set);
  });
});

describe('POST /run-tokens after a rotation', () => {
  it('keeps signing with the previous key for the activation period', async () => {
    let now = Date.now();
    const store = createMemoryStore({ projects: { alpha: ['hello'] }, now: () => new Date(now) });
    const before = await store.getRunTokenKeys();
    const oldKid = before.keys[0]?.kid;
    const app = createManagementApi({
      store,
      runs: {
        get: async () => undefined,
        find: async () => undefined,
        list: async () => [],
        getResult: async () => undefined,
        requestCancel: async () => undefined,
      },
      deliveries: { get: async () => undefined },
      log: silentLogger(),
      registry: new Registry(),
      clock: { now: () => now, sleep: async () => {} },
      settings: { runTokenKeyActivationMs: 120_000 },
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise<void>((r) => server.once('listening', () => r()));
    const { port } = server.address() as { port: number };
    try {
      const { token } = await createServiceAccount(store, 'alpha', 'admin', new Date(now + 3600_000));
      // The first key is older than the activation period by the time a rotation happens.
      now += 10 * MIN;
      const rotated = await store.rotateRunTokenKeys();
      const newKid = rotated.keys[0]?.kid;
      expect(newKid).not.toBe(oldKid);
      const kidOfIssued = async () => {
        const r = await fetch(`http://127.0.0.1:${port}/v2/projects/alpha/run-tokens`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ expires_at: new Date(now + 3600_000).toISOString() }),
        });
        expect(r.status).toBe(201);
        return decodeProtectedHeader(((await r.json()) as { token: string }).token).kid;
      };
      expect(await kidOfIssued()).toBe(oldKid);
      now += 3 * MIN;
      expect(await kidOfIssued()).toBe(newKid);
    } finally {
      server.close();
      server.closeAllConnections();
    }
  });
});
