import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../shared/log.ts';
import { createFunctionsCache } from './functions.ts';

let server: Server;
let base: string;
let hits = 0;
let answer: { status: number; body: string } = {
  status: 200,
  body: '{"functions":[{"name":"echo"},{"name":"ticks"}]}',
};

beforeAll(async () => {
  server = createServer((req, res) => {
    hits++;
    if (req.url !== '/functions') return void res.writeHead(404).end();
    res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const a = server.address();
  base = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const settle = () => new Promise((r) => setTimeout(r, 200));

describe('createFunctionsCache', () => {
  it('answers unknown at first, then what the runtime lists; refreshes when the version changes', async () => {
    let t = 0;
    const cache = createFunctionsCache({
      log: silentLogger(),
      timeoutMs: 2_000,
      ttlMs: 60_000,
      now: () => t,
    });
    expect(cache.known(base, 'v1')).toBeUndefined();
    await settle();
    expect(cache.known(base, 'v1')).toEqual(['echo', 'ticks']);
    const before = hits;
    expect(cache.known(base, 'v1')).toEqual(['echo', 'ticks']);
    expect(hits).toBe(before);
    answer = { status: 200, body: '{"functions":[{"name":"echo"}]}' };
    expect(cache.known(base, 'v2')).toBeUndefined();
    await settle();
    expect(cache.known(base, 'v2')).toEqual(['echo']);
    t = 120_000; // stale: still answers, refreshes behind
    expect(cache.known(base, 'v2')).toEqual(['echo']);
    await settle();
    await cache.close();
  });

  it('a failing lookup stays unknown', async () => {
    answer = { status: 500, body: 'no' };
    const cache = createFunctionsCache({ log: silentLogger(), timeoutMs: 2_000, ttlMs: 60_000 });
    expect(cache.known(base, 'v1')).toBeUndefined();
    await settle();
    expect(cache.known(base, 'v1')).toBeUndefined();
    await cache.close();
  });
});
