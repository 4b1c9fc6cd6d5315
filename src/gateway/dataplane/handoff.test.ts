import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createConnection, createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../shared/log.ts';
import {
  formatHandoffMarker,
  HANDOFF_KEEP_ALIVE_TIMEOUT_MS,
  HANDOFF_REASONS,
  type HandoffMarker,
  parseHandoffMarker,
  serveHandoff,
} from './handoff.ts';

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

describe('serveHandoff: the socket file', () => {
  const dir = () => mkdtempSync(join(tmpdir(), 'apphost-handoff-unit-'));
  const serve = (path: string) =>
    serveHandoff({
      path,
      callback: (_req, res) => res.end('served'),
      log: silentLogger(),
      registry: new Registry(),
    });
  const get = (path: string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest({ socketPath: path, path: '/', method: 'GET' }, (res) => {
        let body = '';
        res.on('data', (c) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });

  it('replaces a socket file a dead process left, and removes its own on close', async () => {
    const path = join(dir(), 'handoff.sock');
    // A process that bound the socket and died: the file stays, nothing answers on it.
    execFileSync('python3', [
      '-c',
      `import socket; socket.socket(socket.AF_UNIX).bind(${JSON.stringify(path)})`,
    ]);
    expect(lstatSync(path).isSocket()).toBe(true);
    const h = await serve(path);
    expect((await get(path)).status).toBe(400); // no marker: refused, but it is this server answering
    await h.close();
    expect(existsSync(path)).toBe(false);
  });

  it('refuses a path another server listens on, or one that is not a socket, and leaves them alone', async () => {
    const live = join(dir(), 'live.sock');
    const other = createNetServer((s) => s.end());
    await new Promise<void>((r) => other.listen(live, r));
    try {
      await expect(serve(live)).rejects.toThrow(/another server is listening/);
      expect(lstatSync(live).isSocket()).toBe(true);
    } finally {
      await new Promise<void>((r) => other.close(() => r()));
    }
    const file = join(dir(), 'file.sock');
    writeFileSync(file, 'keep me');
    await expect(serve(file)).rejects.toThrow(/not a socket/);
    expect(readFileSync(file, 'utf8')).toBe('keep me');
  });

  it('serves a handed-off call that has no Host (an HTTP/1.0 caller sent none; the data plane adds none)', async () => {
    const path = join(dir(), 'handoff.sock');
    const h = await serveHandoff({
      path,
      callback: (req, res) => res.end(`served host=${req.headers.host ?? '(none)'}`),
      log: silentLogger(),
      registry: new Registry(),
    });
    try {
      const marker = formatHandoffMarker({ requestId: ID, startedAt: Date.now(), reason: 'not_served' });
      const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpRequest(
          { socketPath: path, path: '/v4/p/a/run', setHost: false, headers: { 'x-apphost-handoff': marker } },
          (res) => {
            let body = '';
            res.on('data', (c) => {
              body += c;
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end();
      });
      expect(answer).toEqual({ status: 200, body: 'served host=(none)' });
    } finally {
      await h.close();
    }
  });

  it('reads on after a Connection: close answer given before the body was read, so the data plane keeps the answer', async () => {
    // A 413 decided from Content-Length: the data plane is still sending the body when Node answers. Had
    // Node closed at once, the next write would fail (EPIPE) and hyper could report that instead of the 413.
    const path = join(dir(), 'handoff.sock');
    const h = await serveHandoff({
      path,
      callback: (_req, res) => {
        res.writeHead(413, { connection: 'close', 'content-length': 2 });
        res.end('no');
      },
      log: silentLogger(),
      registry: new Registry(),
    });
    try {
      const marker = formatHandoffMarker({ requestId: ID, startedAt: Date.now(), reason: 'body_over_limit' });
      const socket = createConnection({ path, allowHalfOpen: true }); // the data plane writes on after the answer ends
      const received: Buffer[] = [];
      socket.on('data', (c: Buffer) => received.push(c));
      const ended = new Promise<void>((resolve) => socket.once('end', resolve));
      const failed = new Promise<Error>((resolve) => socket.once('error', resolve));
      socket.write(
        `POST /v4/p/a/run HTTP/1.1\r\nhost: x\r\nx-apphost-handoff: ${marker}\r\ncontent-length: 1048576\r\n\r\n`,
      );
      socket.write(Buffer.alloc(64 * 1024, 'z'));
      await ended; // the whole answer, then Node's FIN
      expect(Buffer.concat(received).toString('latin1')).toMatch(/^HTTP\/1\.1 413 [\s\S]*\r\n\r\nno$/);
      // Node closing at once would make these writes fail; lingering, it drops them.
      await new Promise((r) => setTimeout(r, 100));
      for (let i = 0; i < 4; i++) socket.write(Buffer.alloc(64 * 1024, 'z'));
      const outcome = await Promise.race([
        failed.then((e) => `error ${(e as NodeJS.ErrnoException).code}`),
        new Promise<string>((r) =>
          socket.write(Buffer.alloc(1, 'z'), (e) => r(e ? `error ${e.message}` : 'written')),
        ),
      ]);
      expect(outcome).toBe('written');
      socket.destroy();
    } finally {
      await h.close();
    }
  });

  it('close() waits for a call in flight up to its bound, then cuts it', async () => {
    const path = join(dir(), 'handoff.sock');
    const h = await serveHandoff({
      path,
      callback: () => {}, // never answers
      log: silentLogger(),
      registry: new Registry(),
      closeTimeoutMs: 300,
    });
    const marker = formatHandoffMarker({ requestId: ID, startedAt: Date.now(), reason: 'not_served' });
    const inflight = new Promise<string>((resolve) => {
      const req = httpRequest(
        { socketPath: path, path: '/', method: 'POST', headers: { 'x-apphost-handoff': marker } },
        () => resolve('answered'),
      );
      req.on('error', (err) => resolve((err as NodeJS.ErrnoException).code ?? 'error'));
      req.end('{}');
    });
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    await h.close();
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(1_500);
    expect(await inflight).toBe('ECONNRESET');
  });
});

it("keeps an idle connection longer than the data plane's pool does (native/dataplane/src/handoff.rs)", () => {
  // Else Node may close a pooled connection as the data plane sends a call on it: a 503
  // gateway_unavailable {reason: closed} for a call that may have run.
  const rust = readFileSync(join(import.meta.dirname, '../../../native/dataplane/src/handoff.rs'), 'utf8');
  const m = /pub const HANDOFF_POOL_IDLE_MS: u64 = ([0-9_]+);/.exec(rust);
  expect(m, 'HANDOFF_POOL_IDLE_MS in handoff.rs').not.toBeNull();
  const poolIdleMs = Number((m?.[1] ?? '').replaceAll('_', ''));
  expect(poolIdleMs).toBeGreaterThan(0);
  expect(HANDOFF_KEEP_ALIVE_TIMEOUT_MS).toBeGreaterThan(poolIdleMs);
});

it('knows every reason the data plane sends, and no other (native/dataplane/src/handoff.rs Reason::as_str)', () => {
  // A reason the data plane sends and this server does not know is a 400 for every such call.
  const rust = readFileSync(join(import.meta.dirname, '../../../native/dataplane/src/handoff.rs'), 'utf8');
  const sent = [...rust.matchAll(/Reason::[A-Za-z]+ => "([a-z_]+)"/g)].map((m) => m[1]);
  expect(sent.length).toBeGreaterThan(0);
  expect(new Set(sent)).toEqual(new Set(HANDOFF_REASONS));
});
