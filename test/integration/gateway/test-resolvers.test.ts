/**
 * The test resolvers' app tables (helpers.ts): the gateway suites' resolvers feed the native data plane
 * through `watchApps` as the cluster's resolver does, so a change a test makes must reach a watcher.
 */
import { describe, expect, it } from 'vitest';
import type { AppSink, ResolvedApp } from '../../../src/shared/contracts/seams.ts';
import { replicaResolver, resolvedApp, staticResolver } from './helpers.ts';

function recorder(): AppSink & { table: Map<string, ResolvedApp>; events: string[] } {
  const table = new Map<string, ResolvedApp>();
  const events: string[] = [];
  return {
    table,
    events,
    setApp: (a) => {
      table.set(`${a.projectId}/${a.appName}`, a);
      events.push(`set ${a.appName}`);
    },
    removeApp: (p, a) => {
      table.delete(`${p}/${a}`);
      events.push(`remove ${a}`);
    },
  };
}

describe.each([
  ['staticResolver', (apps: ResolvedApp[]) => staticResolver(apps)],
  ['replicaResolver', (apps: ResolvedApp[]) => replicaResolver(apps)],
])('%s: watchApps', (_name, make) => {
  it('reports the table at once, then each change, addition and removal on changed(), until stopped', () => {
    const apps = [resolvedApp('p', 'a', 'http://127.0.0.1:1'), resolvedApp('p', 'b', 'http://127.0.0.1:2')];
    const r = make(apps);
    const sink = recorder();
    const stop = r.watchApps?.(sink);
    expect([...sink.table.keys()]).toEqual(['p/a', 'p/b']);

    (apps[0] as ResolvedApp).ready = false;
    apps.push(resolvedApp('p', 'c', 'http://127.0.0.1:3'));
    apps.splice(1, 1);
    r.changed();
    expect(sink.table.get('p/a')?.ready).toBe(false);
    expect([...sink.table.keys()].sort()).toEqual(['p/a', 'p/c']);
    expect(sink.events).toContain('remove b');

    stop?.();
    apps.push(resolvedApp('p', 'd', 'http://127.0.0.1:4'));
    r.changed();
    expect(sink.table.has('p/d')).toBe(false);
  });
});

describe('staticResolver: watchDomains', () => {
  it('reports its hosts at once, then each assignment, move and removal on changed(), until stopped', () => {
    const r = staticResolver([], { 'a.example': { projectId: 'p', appName: 'a' } });
    const table = new Map<string, string>();
    const events: string[] = [];
    const stop = r.watchDomains?.({
      setDomain: (host, t) => {
        if (t) table.set(host, `${t.projectId}/${t.appName}`);
        else table.delete(host);
        events.push(`${host} ${t ? t.appName : 'gone'}`);
      },
    });
    expect([...table]).toEqual([['a.example', 'p/a']]);

    r.hosts['b.example'] = { projectId: 'p', appName: 'b' };
    r.hosts['a.example'] = { projectId: 'p', appName: 'c' };
    r.changed();
    expect(Object.fromEntries(table)).toEqual({ 'a.example': 'p/c', 'b.example': 'p/b' });

    delete r.hosts['a.example'];
    r.changed();
    expect(Object.fromEntries(table)).toEqual({ 'b.example': 'p/b' });
    expect(events).toContain('a.example gone');

    stop?.();
    r.hosts['d.example'] = { projectId: 'p', appName: 'd' };
    r.changed();
    expect(table.has('d.example')).toBe(false);
  });
});
