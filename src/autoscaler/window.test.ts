import { describe, expect, it } from 'vitest';
import { SampleWindow } from './window.ts';

describe('SampleWindow', () => {
  it('averages the samples of the trailing window; the panic window sees only the newest', () => {
    const w = new SampleWindow(60_000);
    for (let t = 0; t <= 58_000; t += 2_000) w.record(t, t < 52_000 ? 0 : 30);
    // 30 samples, the last 4 (52, 54, 56, 58 s) at 30.
    expect(w.average(58_000, 60_000)).toBeCloseTo((4 * 30) / 30);
    expect(w.average(58_000, 6_000)).toBe(30);
  });

  it('forgets samples older than the longest window, and answers 0 without samples', () => {
    const w = new SampleWindow(10_000);
    expect(w.average(0, 10_000)).toBe(0);
    w.record(0, 100);
    w.record(5_000, 0);
    w.record(10_000, 0);
    expect(w.size).toBe(2);
    expect(w.average(10_000, 10_000)).toBe(0);
    expect(w.average(20_000, 10_000)).toBe(0);
  });
});
