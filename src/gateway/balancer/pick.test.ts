import { describe, expect, it } from 'vitest';
import { nextUnblock, pickReplica, type ReplicaLoad } from './pick.ts';

const r = (inflight: number, blockedUntil = 0): ReplicaLoad => ({ inflight, blockedUntil });

describe('pickReplica', () => {
  it.each<[string, ReplicaLoad[], number, number, number]>([
    ['no replicas', [], 2, 0, -1],
    ['least loaded wins', [r(2), r(1), r(3)], 4, 0, 1],
    ['a full replica is skipped', [r(1), r(0)], 1, 0, 1],
    ['every replica full', [r(1), r(1)], 1, 0, -1],
    ['ties: the first at or after start (round robin)', [r(0), r(0), r(0)], 1, 1, 1],
    ['ties wrap around', [r(1), r(2), r(1)], 3, 2, 2],
    ['a blocked replica is skipped even when idle', [r(0, 500), r(1)], 2, 0, 1],
    ['a block in the past no longer counts', [r(0, 100), r(1)], 2, 0, 0],
  ])('%s', (_name, replicas, capacity, start, want) => {
    expect(pickReplica(replicas, capacity, 200, start)).toBe(want);
  });
});

describe('nextUnblock', () => {
  it('is the earliest block end of a replica with room, even one already past; none when all are full', () => {
    expect(nextUnblock([r(0, 900), r(0, 700), r(5, 300)], 5)).toBe(700);
    expect(nextUnblock([r(5, 300)], 5)).toBeUndefined();
    // The block ended between the failed pick and this look: try again at once, not never.
    expect(nextUnblock([r(0, 100), r(0, 900)], 5)).toBe(100);
  });
});
