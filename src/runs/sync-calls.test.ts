import { describe, expect, it } from 'vitest';
import {
  createSyncCallLimiter,
  createSyncCallRecorder,
  type SyncCall,
  syncCallRecord,
} from './sync-calls.ts';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const call = (over: Partial<SyncCall> = {}): SyncCall => ({
  requestId: 'req-1',
  projectId: 'p',
  appName: 'a',
  path: 'predict',
  status: 200,
  startedAtMs: T0,
  finishedAtMs: T0 + 1500,
  aborted: false,
  streamed: false,
  ...over,
});

describe('syncCallRecord', () => {
  it('is a finished run record of mode sync, without a body', () => {
    expect(syncCallRecord(call({ webhookHost: 'hooks.example.test' }))).toEqual({
      mode: 'sync',
      runId: 'req-1',
      projectId: 'p',
      appName: 'a',
      path: 'predict',
      state: 'success',
      createdAt: '2026-01-01T00:00:00.000Z',
      startedAt: '2026-01-01T00:00:00.000Z',
      finishedAt: '2026-01-01T00:00:01.500Z',
      executions: 1,
      responseStatus: 200,
      webhookHost: 'hooks.example.test',
    });
  });

  it.each([
    [{ status: 302 }, 'success', undefined],
    [{ status: 500 }, 'failure', undefined],
    [{ status: 422 }, 'failure', undefined],
    [
      { status: 504, errorCode: 'upstream_timeout', errorMessage: 'no answer in 300 s' },
      'timeout',
      'upstream_timeout',
    ],
    [{ status: 503, errorCode: 'queue_timeout', errorMessage: 'waited' }, 'failure', 'queue_timeout'],
    [{ status: 200, aborted: true }, 'cancelled', 'client_closed'],
  ] as const)('%j is %s', (over, state, code) => {
    const r = syncCallRecord(call(over));
    expect(r.state).toBe(state);
    expect(r.error?.code).toBe(code);
  });

  it('marks a stream', () => {
    expect(syncCallRecord(call({ streamed: true })).streamed).toBe(true);
  });
});

describe('createSyncCallLimiter', () => {
  it('admits at most perAppPerSecond per app and perSecond in all, each second anew', () => {
    const limit = createSyncCallLimiter({ perAppPerSecond: 2, perSecond: 3 });
    const admit = (app: string, ms: number) => limit('p', app, ms);
    const at = (ms: number) => T0 + ms;
    expect([admit('a', at(0)), admit('a', at(10)), admit('a', at(20))]).toEqual([true, true, false]);
    // Another app has its own share, within the total.
    expect([admit('b', at(30)), admit('b', at(40))]).toEqual([true, false]);
    // The next second starts over.
    expect([admit('a', at(1000)), admit('b', at(1001)), admit('a', at(1002)), admit('c', at(1003))]).toEqual([
      true,
      true,
      true,
      false,
    ]);
  });

  it('records nothing when perAppPerSecond is 0', () => {
    expect(createSyncCallLimiter({ perAppPerSecond: 0, perSecond: 100 })('p', 'a', T0)).toBe(false);
  });
});

describe('createSyncCallRecorder', () => {
  it('publishes an admitted call on its app subject, counts the others, and never throws', () => {
    const sent: Array<[string, string]> = [];
    const skipped: string[] = [];
    let fail = false;
    const rec = createSyncCallRecorder({
      publish: (subject, data) => {
        if (fail) throw new Error('connection closed');
        sent.push([subject, data]);
      },
      settings: { perAppPerSecond: 1, perSecond: 10 },
      skipped: (why) => skipped.push(why),
    });
    rec.record(call());
    rec.record(call({ requestId: 'req-2' }));
    fail = true;
    expect(() => rec.record(call({ requestId: 'req-3', appName: 'b' }))).not.toThrow();
    expect(sent.map(([s]) => s)).toEqual(['apphost.calls.p.a']);
    expect(JSON.parse(sent[0]?.[1] ?? '{}')).toMatchObject({ runId: 'req-1', mode: 'sync' });
    expect(skipped).toEqual(['rate', 'publish_failed']);
  });

  it('in two steps: admit takes a place within the bounds (one over them is skipped as rate), recordAdmitted publishes', () => {
    const sent: string[] = [];
    const skipped: string[] = [];
    const rec = createSyncCallRecorder({
      publish: (subject) => sent.push(subject),
      settings: { perAppPerSecond: 1, perSecond: 10 },
      skipped: (why) => skipped.push(why),
    });
    expect(rec.admit('p', 'a', T0)).toBe(true);
    rec.recordAdmitted(call());
    expect(rec.admit('p', 'a', T0 + 10)).toBe(false);
    // The same app name in another project has its own share.
    expect(rec.admit('q', 'a', T0 + 20)).toBe(true);
    // record() and admit() share the bounds.
    rec.record(call({ requestId: 'req-2', finishedAtMs: T0 + 30 }));
    expect(sent).toHaveLength(1);
    expect(skipped).toEqual(['rate', 'rate']);
    const off = createSyncCallRecorder({
      publish: () => {},
      settings: { perAppPerSecond: 0, perSecond: 10 },
    });
    expect(off.admit('p', 'a', T0)).toBe(false);
  });

  it('drops records while NATS is disconnected instead of queueing them', () => {
    const sent: string[] = [];
    const skipped: string[] = [];
    let up = false;
    const rec = createSyncCallRecorder({
      publish: (subject) => sent.push(subject),
      connected: () => up,
      settings: { perAppPerSecond: 10, perSecond: 10 },
      skipped: (why) => skipped.push(why),
    });
    rec.record(call());
    up = true;
    rec.record(call({ requestId: 'req-2' }));
    expect(sent).toEqual(['apphost.calls.p.a']);
    expect(skipped).toEqual(['disconnected']);
  });

  it('admit never throws, also when counting a call over the bounds fails (it runs in a close listener)', () => {
    const skipped: string[] = [];
    const rec = createSyncCallRecorder({
      publish: () => {},
      settings: { perAppPerSecond: 1, perSecond: 10 },
      skipped: (why) => {
        if (why === 'rate') throw new Error('metrics registry gone');
        skipped.push(why);
      },
    });
    expect(rec.admit('p', 'a', 1_000)).toBe(true);
    expect(() => rec.admit('p', 'a', 1_000)).not.toThrow();
    expect(rec.admit('p', 'a', 1_000)).toBe(false);
    expect(skipped).toEqual(['publish_failed', 'publish_failed']);
  });

  it('does not throw on a call it cannot turn into a record', () => {
    const skipped: string[] = [];
    const rec = createSyncCallRecorder({
      publish: () => {},
      settings: { perAppPerSecond: 10, perSecond: 10 },
      skipped: (why) => skipped.push(why),
    });
    expect(() => rec.record(call({ startedAtMs: Number.NaN }))).not.toThrow();
    expect(skipped).toEqual(['publish_failed']);
  });
});
