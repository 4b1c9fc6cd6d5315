import { describe, expect, it } from 'vitest';
import { replicasCaughtUp } from './replicas.ts';

const peer = (current: boolean) => ({ name: 'n', current, offline: false, active: 0, lag: 0 });
const config = { num_replicas: 3 } as never;

describe('replicasCaughtUp', () => {
  it.each([
    ['a single copy needs no peers', 1, undefined, true],
    ['no leader elected yet', 3, { replicas: [peer(true), peer(true)] }, false],
    ['a copy still catching up', 3, { leader: 'a', replicas: [peer(true), peer(false)] }, false],
    ['copies not yet placed', 3, { leader: 'a', replicas: [peer(true)] }, false],
    ['leader and every copy current', 3, { leader: 'a', replicas: [peer(true), peer(true)] }, true],
  ])('%s', (_name, want, cluster, expected) => {
    expect(replicasCaughtUp({ cluster, config }, want)).toBe(expected);
  });
});
