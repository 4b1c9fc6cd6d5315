import { describe, expect, it } from 'vitest';
import { formatBytes, formatDuration, formatResult, formatTime, tomorrow } from './format.ts';

describe('formatResult', () => {
  it('pretty-prints JSON and keeps other text as sent', () => {
    expect(formatResult('{"a":1,"b":[2]}', 1000)).toEqual({
      text: '{\n  "a": 1,\n  "b": [\n    2\n  ]\n}',
      truncated: false,
      shownBytes: 32,
    });
    expect(formatResult('plain <b>text</b>', 1000).text).toBe('plain <b>text</b>');
  });

  it('cuts at the byte bound without splitting a character, and says so', () => {
    const r = formatResult(JSON.stringify('é'.repeat(100)), 51);
    expect(r.truncated).toBe(true);
    expect(r.shownBytes).toBeLessThanOrEqual(51);
    expect(r.text).not.toContain('\uFFFD');
    expect(r.text.endsWith('\n…')).toBe(true);
  });
});

describe('formatBytes', () => {
  it.each([
    [0, '0 B'],
    [1023, '1023 B'],
    [1536, '1.5 KiB'],
    [262_144, '256 KiB'],
    [3 * 1024 * 1024, '3.0 MiB'],
  ])('%d bytes read %s', (n, text) => {
    expect(formatBytes(n)).toBe(text);
  });
});

describe('formatDuration / formatTime', () => {
  it.each([
    [250, '250 ms'],
    [1500, '1.5 s'],
    [42_000, '42 s'],
    [125_000, '2 min 5 s'],
    [3_900_000, '1 h 5 min'],
    [-1, '—'],
    [Number.NaN, '—'],
  ])('%d ms reads %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('shows UTC to the second, and a dash for nothing', () => {
    expect(formatTime('2026-05-01T14:03:07.123+02:00')).toBe('2026-05-01 12:03:07 UTC');
    expect(formatTime(undefined)).toBe('—');
    expect(tomorrow(Date.parse('2026-12-31T23:00:00Z'))).toBe('2027-01-01');
  });
});
