import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { createLogger, lazyChild } from './log.ts';

function capture(level: string) {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger({ name: 'test', level, destination }), lines };
}

describe('lazyChild', () => {
  it('makes no child while only disabled levels are logged', () => {
    const { log, lines } = capture('warn');
    const child = vi.spyOn(log, 'child');
    const l = lazyChild(log, { requestId: 'r-1' });
    l.info({ a: 1 }, 'not written');
    l.debug('not written either');
    expect(child).not.toHaveBeenCalled();
    expect(lines).toEqual([]);
  });

  it('writes enabled lines with the bindings, redacted, through one child', () => {
    const { log, lines } = capture('info');
    const child = vi.spyOn(log, 'child');
    const l = lazyChild(log, { requestId: 'r-2', token: 'sekrit' });
    l.info({ state: 'success' }, 'run finished');
    l.warn('again');
    expect(child).toHaveBeenCalledTimes(1);
    expect(lines).toMatchObject([
      { requestId: 'r-2', token: '[redacted]', state: 'success', msg: 'run finished', level: 30 },
      { requestId: 'r-2', msg: 'again', level: 40 },
    ]);
    expect(l.isLevelEnabled('debug')).toBe(false);
  });
});
