import { describe, expect, it } from 'vitest';
import { ConcurrencyMeter } from './meter.ts';

describe('ConcurrencyMeter', () => {
  it('averages the level over time between reads', () => {
    const m = new ConcurrencyMeter(0);
    m.set(0, 2);
    m.set(500, 0); // 2 for half a second
    expect(m.take(1_000)).toBe(1);
    // Restarted: level 0 since.
    m.set(1_250, 4);
    expect(m.take(2_000)).toBe(3);
    // No time passed: the current level.
    expect(m.take(2_000)).toBe(4);
  });
});
