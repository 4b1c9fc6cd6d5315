import { describe, expect, it } from 'vitest';
import { effectiveScaling } from '../../apis/v1alpha1/scaling.ts';
import type { Replica, ReplicaSink, ResolvedApp, StartFailure } from '../../shared/contracts/seams.ts';
import { DEFAULT_BALANCER_SETTINGS, poolSettingsFor } from '../balancer/balancer.ts';
import type { RememberedToken } from '../token-cache.ts';
import { createStateFeed, teeReplicas, toWireApp } from './feed.ts';
import { encodePayload, parsePayload, type StateMessage } from './protocol.ts';

const GEN = 'gen-1';
const B = DEFAULT_BALANCER_SETTINGS;
const app = (name: string, over: Partial<ResolvedApp> = {}): ResolvedApp => ({
  projectId: 'p',
  appName: name,
  runtime: 'cortex',
  upstream: `http://${name}.p.svc:8080`,
  ready: true,
  gracePeriodSeconds: 30,
  ...over,
});
const wire = (a: ResolvedApp) => toWireApp(a, B);
const r1: Replica = { id: '10.0.0.1:8080', url: 'http://10.0.0.1:8080' };
const r2: Replica = { id: '10.0.0.2:8080', url: 'http://10.0.0.2:8080' };
const fail: StartFailure = { reason: 'ImagePullBackOff', message: 'no image' };
const tok = (n: number, until: number, projectId = 'p'): RememberedToken => ({
  sha256: n.toString(16).padStart(64, '0'),
  projectId,
  until,
});
const sha = (n: number) => n.toString(16).padStart(64, '0');
const empty = { apps: [], replicas: [], failures: [], domains: [], tokens: [] };

type Step =
  | ['app', ResolvedApp]
  | ['remove', string]
  | ['replicas', string, Replica[]]
  | ['failure', string, StartFailure | undefined]
  | ['domain', string, string | undefined]
  | ['token', RememberedToken]
  | ['clock', number]
  | ['connect']
  | ['disconnect']
  | ['resync'];

/** Omit over each member of a union (Omit on the union itself keeps only the common fields). */
type WithoutGen<T> = T extends unknown ? Omit<T, 'gen'> : never;

interface Row {
  name: string;
  maxTokens?: number;
  steps: Step[];
  /** Every frame sent, in order (gen is GEN throughout). */
  frames: Array<WithoutGen<StateMessage>>;
}

const ROWS: Row[] = [
  {
    name: 'what was reported before connecting is the snapshot; each change after it a delta, seq + 1',
    steps: [
      ['app', app('a')],
      ['replicas', 'a', [r1]],
      ['connect'],
      ['app', app('b')],
      ['replicas', 'a', [r1, r2]],
    ],
    frames: [
      {
        type: 'snapshot',
        seq: 0,
        ...empty,
        apps: [wire(app('a'))],
        replicas: [{ key: 'p/a', replicas: [r1] }],
      },
      { type: 'app', seq: 1, key: 'p/b', app: wire(app('b')) },
      { type: 'replicas', seq: 2, key: 'p/a', replicas: [r1, r2] },
    ],
  },
  {
    name: 'an app reported again unchanged sends nothing; a change of readiness or functions does',
    steps: [
      ['connect'],
      ['app', app('a')],
      ['app', app('a')],
      ['app', app('a', { ready: false })],
      ['app', app('a', { ready: false, functions: ['f'] })],
    ],
    frames: [
      { type: 'snapshot', seq: 0, ...empty },
      { type: 'app', seq: 1, key: 'p/a', app: wire(app('a')) },
      { type: 'app', seq: 2, key: 'p/a', app: wire(app('a', { ready: false })) },
      { type: 'app', seq: 3, key: 'p/a', app: wire(app('a', { ready: false, functions: ['f'] })) },
    ],
  },
  {
    name: 'removing an app never reported sends nothing; a known one is sent as null and leaves the snapshot',
    steps: [['app', app('a')], ['connect'], ['remove', 'x'], ['remove', 'a'], ['remove', 'a'], ['resync']],
    frames: [
      { type: 'snapshot', seq: 0, ...empty, apps: [wire(app('a'))] },
      { type: 'app', seq: 1, key: 'p/a', app: null },
      { type: 'snapshot', seq: 2, ...empty },
    ],
  },
  {
    name: 'replicas: the same set again sends nothing; none is sent as [] and leaves the snapshot',
    steps: [
      ['connect'],
      ['replicas', 'a', [r1]],
      ['replicas', 'a', [{ ...r1 }]],
      ['replicas', 'a', []],
      ['replicas', 'a', []],
      ['resync'],
    ],
    frames: [
      { type: 'snapshot', seq: 0, ...empty },
      { type: 'replicas', seq: 1, key: 'p/a', replicas: [r1] },
      { type: 'replicas', seq: 2, key: 'p/a', replicas: [] },
      { type: 'snapshot', seq: 3, ...empty },
    ],
  },
  {
    name: 'start failures: set, the same again, cleared, cleared again',
    steps: [
      ['failure', 'a', undefined],
      ['connect'],
      ['failure', 'a', fail],
      ['failure', 'a', { ...fail }],
      ['resync'],
      ['failure', 'a', undefined],
      ['failure', 'a', undefined],
    ],
    frames: [
      { type: 'snapshot', seq: 0, ...empty },
      { type: 'failure', seq: 1, key: 'p/a', failure: fail },
      { type: 'snapshot', seq: 2, ...empty, failures: [{ key: 'p/a', failure: fail }] },
      { type: 'failure', seq: 3, key: 'p/a', failure: null },
    ],
  },
  {
    name: 'domains: lower-cased, the same assignment again sends nothing, unassigned as null',
    steps: [
      ['connect'],
      ['domain', 'API.Example.com', 'a'],
      ['domain', 'api.example.com', 'a'],
      ['resync'],
      ['domain', 'api.example.com', undefined],
    ],
    frames: [
      { type: 'snapshot', seq: 0, ...empty },
      { type: 'domain', seq: 1, host: 'api.example.com', target: { projectId: 'p', appName: 'a' } },
      {
        type: 'snapshot',
        seq: 2,
        ...empty,
        domains: [{ host: 'api.example.com', projectId: 'p', appName: 'a' }],
      },
      { type: 'domain', seq: 3, host: 'api.example.com', target: null },
    ],
  },
  {
    name: 'tokens: one already expired is not sent; the snapshot leaves out those expired since',
    steps: [
      ['clock', 1_000],
      ['token', tok(1, 1_000)],
      ['token', tok(2, 5_000)],
      ['token', tok(3, 9_000, 'q')],
      ['connect'],
      ['clock', 5_000],
      ['resync'],
    ],
    frames: [
      {
        type: 'snapshot',
        seq: 0,
        ...empty,
        tokens: [
          { sha256: sha(2), projectId: 'p', until: 5_000 },
          { sha256: sha(3), projectId: 'q', until: 9_000 },
        ],
      },
      { type: 'snapshot', seq: 1, ...empty, tokens: [{ sha256: sha(3), projectId: 'q', until: 9_000 }] },
    ],
  },
  {
    name: 'tokens: at most tokenCacheMaxEntries, the oldest remembered going first; remembered again counts as new',
    maxTokens: 3,
    steps: [
      ['connect'],
      ['token', tok(1, 9_000)],
      ['token', tok(2, 9_000)],
      ['token', tok(1, 9_500)],
      ['token', tok(3, 9_000)],
      ['token', tok(4, 9_000)],
      ['resync'],
    ],
    frames: [
      { type: 'snapshot', seq: 0, ...empty },
      { type: 'token', seq: 1, sha256: sha(1), projectId: 'p', until: 9_000 },
      { type: 'token', seq: 2, sha256: sha(2), projectId: 'p', until: 9_000 },
      { type: 'token', seq: 3, sha256: sha(1), projectId: 'p', until: 9_500 },
      { type: 'token', seq: 4, sha256: sha(3), projectId: 'p', until: 9_000 },
      { type: 'token', seq: 5, sha256: sha(4), projectId: 'p', until: 9_000 },
      {
        type: 'snapshot',
        seq: 6,
        ...empty,
        tokens: [
          { sha256: sha(1), projectId: 'p', until: 9_500 },
          { sha256: sha(3), projectId: 'p', until: 9_000 },
          { sha256: sha(4), projectId: 'p', until: 9_000 },
        ],
      },
    ],
  },
  {
    name: 'a full table drops expired entries before live ones',
    maxTokens: 2,
    steps: [
      ['connect'],
      ['token', tok(1, 9_000)],
      ['token', tok(2, 2_000)],
      ['clock', 3_000],
      ['token', tok(3, 9_000)],
      ['resync'],
    ],
    frames: [
      { type: 'snapshot', seq: 0, ...empty },
      { type: 'token', seq: 1, sha256: sha(1), projectId: 'p', until: 9_000 },
      { type: 'token', seq: 2, sha256: sha(2), projectId: 'p', until: 2_000 },
      { type: 'token', seq: 3, sha256: sha(3), projectId: 'p', until: 9_000 },
      {
        type: 'snapshot',
        seq: 4,
        ...empty,
        tokens: [
          { sha256: sha(1), projectId: 'p', until: 9_000 },
          { sha256: sha(3), projectId: 'p', until: 9_000 },
        ],
      },
    ],
  },
  {
    name: 'the cache off (0 entries): no token is kept or sent',
    maxTokens: 0,
    steps: [['connect'], ['token', tok(1, 9_000)], ['resync']],
    frames: [
      { type: 'snapshot', seq: 0, ...empty },
      { type: 'snapshot', seq: 1, ...empty },
    ],
  },
  {
    name: 'disconnected (the child restarting): changes are kept, not sent; the next connect sends them in a snapshot, seq going on',
    steps: [
      ['connect'],
      ['app', app('a')],
      ['disconnect'],
      ['app', app('b')],
      ['replicas', 'b', [r2]],
      ['resync'],
      ['connect'],
      ['remove', 'a'],
    ],
    frames: [
      { type: 'snapshot', seq: 0, ...empty },
      { type: 'app', seq: 1, key: 'p/a', app: wire(app('a')) },
      {
        type: 'snapshot',
        seq: 2,
        ...empty,
        apps: [wire(app('a')), wire(app('b'))],
        replicas: [{ key: 'p/b', replicas: [r2] }],
      },
      { type: 'app', seq: 3, key: 'p/a', app: null },
    ],
  },
];

describe('the state feed', () => {
  it.each(ROWS.map((r) => [r.name, r] as const))('%s', (_, row) => {
    let clock = 0;
    const feed = createStateFeed({
      gen: GEN,
      balancer: B,
      tokenCacheMaxEntries: row.maxTokens ?? 100,
      now: () => clock,
    });
    const sent: StateMessage[] = [];
    const send = (m: StateMessage) => sent.push(m);
    for (const step of row.steps) {
      switch (step[0]) {
        case 'app':
          feed.apps.setApp(step[1]);
          break;
        case 'remove':
          feed.apps.removeApp('p', step[1]);
          break;
        case 'replicas':
          feed.replicas.setReplicas('p', step[1], step[2]);
          break;
        case 'failure':
          feed.replicas.setStartFailure('p', step[1], step[2]);
          break;
        case 'domain':
          feed.domains.setDomain(step[1], step[2] ? { projectId: 'p', appName: step[2] } : undefined);
          break;
        case 'token':
          feed.remember(step[1]);
          break;
        case 'clock':
          clock = step[1];
          break;
        case 'connect':
          feed.connect(send);
          break;
        case 'disconnect':
          feed.disconnect();
          break;
        case 'resync':
          feed.resync();
          break;
      }
    }
    expect(sent).toEqual(row.frames.map((f) => ({ gen: GEN, ...f })));
    expect(feed.seq).toBe(sent.length - 1);
    // Each is a frame the data plane reads as the same message.
    for (const m of sent) expect(parsePayload(encodePayload(m), 'dataplane')).toEqual(m);
  });

  it("computes each app's pool as the balancer does, and sends functions null when unknown", () => {
    const scaled = app('s', { scaling: effectiveScaling({ replicaConcurrency: 3, maxReplicas: 2 }) });
    expect(wire(scaled).pool).toEqual(poolSettingsFor(scaled.scaling!, B));
    expect(wire(scaled).pool.capacity).toBe(3);
    expect(wire(app('d')).pool).toEqual(poolSettingsFor(effectiveScaling(undefined), B));
    expect(wire(app('d')).functions).toBeNull();
    expect(wire(app('f', { functions: ['x'] })).functions).toEqual(['x']);
  });
});

describe('teeReplicas', () => {
  class Resolver {
    #sink: ReplicaSink | undefined;
    resolve() {
      return this.#sink ? 'watched' : 'not watched';
    }
    watchReplicas(sink: ReplicaSink) {
      this.#sink = sink;
    }
    report() {
      this.#sink?.setReplicas('p', 'a', [r1]);
      this.#sink?.setStartFailure('p', 'a', fail);
      return this.#sink?.replicaLoad?.('p', 'a');
    }
  }

  it("reports to the balancer's sink and the feed; the load is the balancer's; other members are the resolver's", () => {
    const inner = new Resolver();
    const got: string[] = [];
    const tee = teeReplicas(inner, {
      setReplicas: (p, a, l) => got.push(`feed replicas ${p}/${a} ${l.length}`),
      setStartFailure: (p, a, f) => got.push(`feed failure ${p}/${a} ${f?.reason}`),
    });
    expect(tee.resolve()).toBe('not watched');
    tee.watchReplicas({
      setReplicas: (p, a, l) => got.push(`balancer replicas ${p}/${a} ${l.length}`),
      setStartFailure: (p, a, f) => got.push(`balancer failure ${p}/${a} ${f?.reason}`),
      replicaLoad: () => ({ [r1.id]: 2 }),
    });
    expect(tee.resolve()).toBe('watched');
    expect(inner.report()).toEqual({ [r1.id]: 2 });
    expect(got).toEqual([
      'balancer replicas p/a 1',
      'feed replicas p/a 1',
      'balancer failure p/a ImagePullBackOff',
      'feed failure p/a ImagePullBackOff',
    ]);
  });

  it('leaves a resolver that reports no replicas as it is', () => {
    const r = { resolve: () => undefined };
    expect(teeReplicas(r, { setReplicas() {}, setStartFailure() {} })).toBe(r);
  });
});
