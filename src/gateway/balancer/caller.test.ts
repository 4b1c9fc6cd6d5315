import type { Dispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import type { ResolvedApp } from '../../shared/contracts/seams.ts';
import { createBalancer, DEFAULT_BALANCER_SETTINGS } from './balancer.ts';
import { createAppCaller } from './caller.ts';

/** A dispatcher that answers every call at once with a small 200 (the call path without a network). */
const answering = (seen: string[]) =>
  ({
    dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) {
      seen.push(`${opts.origin}`);
      const controller = { abort() {}, pause() {}, resume() {} } as unknown as Dispatcher.DispatchController;
      handler.onRequestStart?.(controller, {});
      handler.onResponseStart?.(controller, 200, { 'content-length': '2' }, 'OK');
      handler.onResponseData?.(controller, Buffer.from('{}'));
      handler.onResponseEnd?.(controller, {});
      return true;
    },
  }) as unknown as Dispatcher;

/** One app without reported replicas, its single upstream a fixed URL. */
const app: ResolvedApp = {
  projectId: 'p',
  appName: 'a',
  runtime: 'custom',
  upstream: 'http://127.0.0.1:1',
  ready: true,
  gracePeriodSeconds: 30,
};

const call = {
  path: 'f',
  query: '',
  headers: {},
  body: Buffer.alloc(0),
  headersTimeoutMs: 1_000,
  bodyTimeoutMs: 0,
  wholeUpTo: 1024,
};

describe('createAppCaller without reported replicas', () => {
  it('tells the pool of the app upstream once, and again when it, readiness or the start failure change', async () => {
    const balancer = createBalancer(DEFAULT_BALANCER_SETTINGS);
    const told: string[] = [];
    const setReplicas = balancer.setReplicas.bind(balancer);
    balancer.setReplicas = (p, a, list) => {
      told.push(list.map((r) => r.url).join(',') || 'none');
      return setReplicas(p, a, list);
    };
    const seen: string[] = [];
    const caller = createAppCaller({ balancer, dispatcher: answering(seen), replicasReported: false });
    for (let i = 0; i < 3; i++) expect((await caller(app, call)).whole?.toString()).toBe('{}');
    expect(told).toEqual(['http://127.0.0.1:1']);
    await caller({ ...app, upstream: 'http://127.0.0.1:2' }, call);
    expect(seen.at(-1)).toBe('http://127.0.0.1:2');
    const failed = {
      ...app,
      upstream: 'http://127.0.0.1:2',
      ready: false,
      startFailure: { reason: 'CrashLoopBackOff', message: 'x' },
    };
    await expect(caller(failed, call)).rejects.toMatchObject({ status: 503 });
    await caller({ ...app, upstream: 'http://127.0.0.1:2' }, call);
    expect(told).toEqual(['http://127.0.0.1:1', 'http://127.0.0.1:2', 'none', 'http://127.0.0.1:2']);
    expect(balancer.find('p', 'a')?.snapshot().inflight).toBe(0);
  });
});

/** A dispatcher that answers the calls in turn as `steps` say: a status (and refusal header), or an error code. */
const scripted = (steps: Array<{ status: number; refused?: string } | { error: string }>) =>
  ({
    dispatch(_opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) {
      const step = steps.shift() ?? { status: 200 };
      const controller = { abort() {}, pause() {}, resume() {} } as unknown as Dispatcher.DispatchController;
      handler.onRequestStart?.(controller, {});
      if ('error' in step) {
        handler.onResponseError?.(controller, Object.assign(new Error(step.error), { code: step.error }));
        return true;
      }
      const headers: Record<string, string> = { 'content-length': '2' };
      if (step.refused) headers['x-apphost-refused'] = step.refused;
      handler.onResponseStart?.(controller, step.status, headers, 'OK');
      handler.onResponseData?.(controller, Buffer.from('{}'));
      handler.onResponseEnd?.(controller, {});
      return true;
    },
  }) as unknown as Dispatcher;

describe('createAppCaller: the first attempt on a slot already taken', () => {
  const settings = { ...DEFAULT_BALANCER_SETTINGS, capacityBlockMs: 0, unreachableBlockMs: 0 };

  it('gives its slot back when the call fails otherwise than by a refusal (a timeout)', async () => {
    const balancer = createBalancer(settings);
    const caller = createAppCaller({
      balancer,
      dispatcher: scripted([{ error: 'UND_ERR_HEADERS_TIMEOUT' }]),
      replicasReported: false,
    });
    await expect(caller(app, call)).rejects.toMatchObject({ status: 504 });
    expect(balancer.find('p', 'a')?.snapshot().inflight).toBe(0);
  });

  it('goes on after a refusal or a refused connection, and holds no slot once answered', async () => {
    const balancer = createBalancer(settings);
    const caller = createAppCaller({
      balancer,
      dispatcher: scripted([
        { status: 429, refused: 'at_capacity' },
        { error: 'ECONNREFUSED' },
        { status: 200 },
      ]),
      replicasReported: false,
    });
    const res = await caller(app, call);
    expect(res.statusCode).toBe(200);
    expect(balancer.find('p', 'a')?.snapshot().inflight).toBe(0);
  });
});
