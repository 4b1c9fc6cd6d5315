import { describe, expect, it } from 'vitest';
import { createSendTurn } from './send-turn.ts';

describe('sendTurn', () => {
  it('starts every send queued in one turn together, in order, on the next turn', async () => {
    const turn = createSendTurn();
    const started: string[] = [];
    const ticks: number[] = [];
    let tick = 0;
    const counter = setInterval(() => tick++, 0);
    const send = (name: string) => () => {
      started.push(name);
      ticks.push(tick);
      return Promise.resolve(name);
    };
    const all = Promise.all([turn(send('a')), turn(send('b')), turn(send('c'))]);
    expect(started).toEqual([]); // not started in the caller's turn
    expect(await all).toEqual(['a', 'b', 'c']);
    clearInterval(counter);
    expect(started).toEqual(['a', 'b', 'c']);
    expect(new Set(ticks).size).toBe(1);
  });

  it('each send keeps its own outcome: a rejected or throwing send fails only its caller', async () => {
    const turn = createSendTurn();
    const results = await Promise.allSettled([
      turn(() => Promise.reject(new Error('refused'))),
      turn(() => {
        throw new Error('thrown');
      }),
      turn(() => Promise.resolve(42)),
    ]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual([
      'refused',
      'thrown',
      42,
    ]);
  });

  it('a send queued while a turn is being started goes out in the following turn', async () => {
    const turn = createSendTurn();
    const order: string[] = [];
    await turn(async () => {
      order.push('first');
      void turn(async () => {
        order.push('second');
      });
    });
    expect(order).toEqual(['first']);
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['first', 'second']);
  });
});
