import { describe, expect, it } from 'vitest';
import { CallAbort } from './call-abort.ts';

describe('CallAbort', () => {
  it('runs each listener once, in order, with the first reason; removed and late listeners never run', () => {
    const a = new CallAbort();
    const seen: string[] = [];
    const first = () => seen.push(`first:${String(a.reason)}`);
    const gone = () => seen.push('gone');
    a.addEventListener('abort', first);
    a.addEventListener('abort', gone);
    a.addEventListener('abort', () => seen.push('second'));
    a.removeEventListener('abort', gone);
    expect(a.aborted).toBe(false);
    a.abort('why');
    a.abort('again');
    a.addEventListener('abort', () => seen.push('late'));
    expect(seen).toEqual(['first:why', 'second']);
    expect(a.aborted).toBe(true);
    expect(a.reason).toBe('why');
  });
});
