import { describe, expect, it } from 'vitest';
import { formatLine, readable } from './logs.ts';

describe('logs output', () => {
  it("reads the runtime's JSON lines as level, message and fields", () => {
    expect(
      readable(
        '{"time":"t","level":"info","msg":"call","request_id":"r1","function":"run","duration_ms":1.5,"status":200}',
      ),
    ).toBe('INFO call request_id=r1 function=run duration_ms=1.5 status=200');
  });

  it('leaves anything else as written', () => {
    expect(readable('Traceback (most recent call last):')).toBe('Traceback (most recent call last):');
    expect(readable('{"not": "a log record"}')).toBe('{"not": "a log record"}');
    expect(readable('{broken')).toBe('{broken');
  });

  it('prefixes the replica and the time', () => {
    expect(formatLine({ replica: 'hello-abc', time: '2026-01-01T00:00:00.000Z', message: 'hi' })).toBe(
      '[hello-abc] 2026-01-01T00:00:00.000Z hi',
    );
    expect(formatLine({ replica: 'p', message: 'no time' })).toBe('[p] no time');
  });
});
