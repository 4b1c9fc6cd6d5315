import { describe, expect, it } from 'vitest';
import { formatHandoffMarker, HANDOFF_REASONS, type HandoffMarker, parseHandoffMarker } from './handoff.ts';

const ID = '0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d';

describe('parseHandoffMarker', () => {
  it('reads every field, with and without a deadline, and round-trips what formatHandoffMarker writes', () => {
    expect(parseHandoffMarker(`v=1; id=${ID}; start=1700000000000; reason=token_miss`)).toEqual({
      marker: { requestId: ID, startedAt: 1_700_000_000_000, reason: 'token_miss' },
    });
    expect(parseHandoffMarker(`v=1;id=${ID};start=5;reason=no_replica;\tdeadline=5`).marker).toEqual({
      requestId: ID,
      startedAt: 5,
      reason: 'no_replica',
      deadline: 5,
    });
    for (const reason of HANDOFF_REASONS) {
      const m: HandoffMarker = { requestId: ID, startedAt: 1, reason, deadline: 2 };
      expect(parseHandoffMarker(formatHandoffMarker(m)).marker).toEqual(m);
    }
  });

  it.each([
    [undefined, 'missing'],
    ['', 'missing'],
    [[`v=1; id=${ID}; start=1; reason=async`, `v=1; id=${ID}; start=1; reason=async`], 'repeated'],
    [`v=1; id=${ID}; start=1; reason=async, v=1; id=${ID}; start=1; reason=async`, 'repeated'],
    [`v=1; id=${ID}; start=1`, 'syntax'],
    [`v=1; id=${ID}; start=1; reason=async; deadline=2; extra=1`, 'syntax'],
    [`v=1; start=1; id=${ID}; reason=async`, 'syntax'],
    [`V=1; id=${ID}; start=1; reason=async`, 'syntax'],
    [`v=1; id=${ID}; start=1; reason=async; deadlne=2`, 'syntax'],
    [`v=1; id=${ID}; start=1; reason=async;`, 'syntax'],
    [`v=2; id=${ID}; start=1; reason=async`, 'version'],
    [`v=01; id=${ID}; start=1; reason=async`, 'version'],
    [`v=1; id=${ID.toUpperCase()}; start=1; reason=async`, 'id'],
    ['v=1; id=; start=1; reason=async', 'id'],
    [`v=1; id=${ID}x; start=1; reason=async`, 'id'],
    [`v=1; id=${ID}; start=-1; reason=async`, 'start'],
    [`v=1; id=${ID}; start=1e12; reason=async`, 'start'],
    [`v=1; id=${ID}; start=01; reason=async`, 'start'],
    [`v=1; id=${ID}; start=99999999999999999; reason=async`, 'start'],
    [`v=1; id=${ID}; start=; reason=async`, 'start'],
    [`v=1; id=${ID}; start=1; reason=ASYNC`, 'reason'],
    [`v=1; id=${ID}; start=1; reason=`, 'reason'],
    [`v=1; id=${ID}; start=1; reason=toString`, 'reason'],
    [`v=1; id=${ID}; start=10; reason=no_replica; deadline=9`, 'deadline'],
    [`v=1; id=${ID}; start=10; reason=no_replica; deadline=`, 'deadline'],
    [`v=1; id=${ID}; start=10; reason=no_replica; deadline=1.5`, 'deadline'],
  ])('refuses %j (%s)', (value, problem) => {
    const r = parseHandoffMarker(value);
    expect(r.marker).toBeUndefined();
    expect(r.error?.problem).toBe(problem);
    expect(r.error?.message).toBeTruthy();
  });

  it('quotes and bounds a bad value in its message', () => {
    const r = parseHandoffMarker(`v=1; id=${ID}; start=1; reason=${'x'.repeat(500)}\u0007`);
    expect(r.error?.problem).toBe('reason');
    expect(r.error?.message.length).toBeLessThan(300);
    expect(r.error?.message).not.toContain('\u0007');
  });
});
