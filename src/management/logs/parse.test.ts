import { describe, expect, it } from 'vitest';
import { mergeByTime, parseKubeletLine, parseSince, requestIdOf } from './parse.ts';

describe('requestIdOf', () => {
  it('reads the request_id of a runtime JSON line, and nothing from anything else', () => {
    expect(requestIdOf('{"level":"info","msg":"call","request_id":"abc-1"}')).toBe('abc-1');
    expect(requestIdOf('{"msg":"no id"}')).toBeUndefined();
    expect(requestIdOf('plain request_id=abc')).toBeUndefined();
    expect(requestIdOf('{"request_id": 5}')).toBeUndefined();
    expect(requestIdOf('{"request_id":"has space"}')).toBeUndefined();
    expect(requestIdOf('{"request_id":')).toBeUndefined();
  });
});

describe('parseKubeletLine', () => {
  it('splits the kubelet timestamp from the message and tags the replica', () => {
    expect(
      parseKubeletLine('2026-11-22T18:00:00.123456789Z {"request_id":"r1","msg":"x"}', 'hello-7d9-abc'),
    ).toEqual({
      time: '2026-11-22T18:00:00.123Z',
      replica: 'hello-7d9-abc',
      message: '{"request_id":"r1","msg":"x"}',
      requestId: 'r1',
    });
  });
  it('keeps a line without a timestamp whole', () => {
    expect(parseKubeletLine('Traceback (most recent call last):', 'p')).toEqual({
      replica: 'p',
      message: 'Traceback (most recent call last):',
    });
  });
});

describe('mergeByTime', () => {
  it('interleaves replicas in time order, keeping each replica’s order for equal times', () => {
    const a = [
      { time: '2026-01-01T00:00:01.000Z', replica: 'a', message: '1' },
      { time: '2026-01-01T00:00:03.000Z', replica: 'a', message: '3' },
    ];
    const b = [
      { time: '2026-01-01T00:00:02.000Z', replica: 'b', message: '2' },
      { time: '2026-01-01T00:00:03.000Z', replica: 'b', message: '3b' },
    ];
    expect(mergeByTime([a, b]).map((l) => l.message)).toEqual(['1', '2', '3', '3b']);
  });
});

describe('parseSince', () => {
  const now = Date.parse('2026-01-01T12:00:00Z');
  it.each([
    ['30s', now - 30_000],
    ['10m', now - 600_000],
    ['2h', now - 7_200_000],
    ['1d', now - 86_400_000],
    ['2026-01-01T11:00:00Z', now - 3_600_000],
  ])('%s', (raw, want) => expect(parseSince(raw, now)).toBe(want));
  it.each(['yesterday', '10', '5w', '2026-01-01'])('refuses %s', (raw) =>
    expect(parseSince(raw, now)).toBeUndefined(),
  );
});
