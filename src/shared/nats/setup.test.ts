import { describe, expect, it } from 'vitest';
import { silentLogger } from '../log.ts';
import { retryJetStreamSetup } from './setup.ts';

describe('retryJetStreamSetup', () => {
  it('retries until the step succeeds', async () => {
    let calls = 0;
    const v = await retryJetStreamSetup(
      'set up',
      async () => {
        if (++calls < 3) throw new Error('JetStream system temporarily unavailable');
        return 'ok';
      },
      { boundMs: 60_000, log: silentLogger(), sleep: async () => undefined },
    );
    expect(v).toBe('ok');
    expect(calls).toBe(3);
  });

  it('gives up after the bound, naming the step and keeping the cause', async () => {
    let t = 0;
    const err = await retryJetStreamSetup(
      'creating RUNS',
      async () => {
        throw new Error('timeout');
      },
      {
        boundMs: 2_000,
        log: silentLogger(),
        now: () => t,
        sleep: async (ms) => {
          t += ms;
        },
      },
    ).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/creating RUNS: JetStream did not answer within 2000 ms/);
    expect(((err as Error).cause as Error).message).toBe('timeout');
  });
});
